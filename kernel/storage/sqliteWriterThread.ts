import { createRequire } from 'node:module'
import type SQLite from 'better-sqlite3'
import { WriterThread } from './writerThread.ts'

/** Rows bound to one multi-row insert statement (SQLite binds at most 32,766 values). */
const rowsPerStatement = 32

/**
 * SQLite's writer thread (writerThread.ts): its connection writes insertMany's batches
 * (at LogLevel 2 a call-log row of about 5 KB costs 20-25 µs of SQLite, more than the
 * rest of the call) and, given `checkpointEveryMs` (the service's database), runs the
 * WAL checkpoints that would otherwise copy and sync pages inside one of the request
 * thread's commits. Each batch is one IMMEDIATE transaction, so it waits busy_timeout
 * for another writer rather than failing. Text given as bytes becomes text here.
 */
export function sqliteWriterThread(file: SQLite.Database, path: string, { checkpointEveryMs }: { checkpointEveryMs: number | null }): WriterThread {
  // Eval'd worker code is CommonJS: it is given the driver's resolved path.
  const driver = createRequire(import.meta.url).resolve('better-sqlite3')
  const checkpoints = checkpointEveryMs !== null
  const writer = new WriterThread({
    source: workerSource,
    workerData: { driver, path, rowsPerStatement, checkpointEveryMs },
    outageCode: 'SQLITE_IOERR',
    // The request thread's connection checkpoints by itself only while no thread does.
    started: () => checkpoints && file.pragma('wal_autocheckpoint = 0'),
    lost: () => checkpoints && file.open && file.pragma('wal_autocheckpoint = 1000'),
  })
  if (checkpoints) writer.start()
  return writer
}

const workerSource = `
const { workerData, parentPort } = require('node:worker_threads')
const SQLite = require(workerData.driver)
const file = new SQLite(workerData.path)
file.pragma('busy_timeout = 5000')
file.pragma('synchronous = NORMAL')
let checkpoints = null
if (workerData.checkpointEveryMs) {
  file.pragma('wal_autocheckpoint = 0')
  checkpoints = setInterval(() => file.pragma('wal_checkpoint(PASSIVE)'), workerData.checkpointEveryMs)
}

const quote = (identifier) => '"' + identifier.replaceAll('"', '""') + '"'
// Text given as its UTF-8 bytes (Database.insertMany) is made text here, off the request thread.
function textsFromBytes(values) {
  for (let index = 0; index < values.length; index++) {
    const value = values[index]
    if (value instanceof Uint8Array) values[index] = Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8')
  }
}

// Shared texts (digest, body, keep_until): inserted once, keep_until only raised, and a
// text already kept that long is not written again.
const upserts = new Map()
function upsertFor(table) {
  let upsert = upserts.get(table)
  if (!upsert) {
    upsert = file.prepare('insert into ' + quote(table) + ' (digest, body, keep_until) values (?, ?, ?) on conflict (digest) do update set keep_until = excluded.keep_until where excluded.keep_until > ' + quote(table) + '.keep_until')
    upserts.set(table, upsert)
  }
  return upsert
}

// Prepared once per table and column list; identifiers are the kernel's, values are bound.
// 'or fail': a batch is all or nothing by its transaction, so a statement that fails
// halfway need not undo its own rows. A plain insert would (abort), and to be able to,
// SQLite copies every page each multi-row statement touches into a statement journal
// that spills to a temporary file: 1.3 µs of a level-0 row's 4.9, 1.8 of a level-2
// row's 7.9 (medians, docs/benchmarks.md).
const inserters = new Map()
function inserterFor(table, columns) {
  const name = table + '(' + columns.join(',') + ')'
  let inserter = inserters.get(name)
  if (inserter) return inserter
  const tuple = '(' + columns.map(() => '?').join(', ') + ')'
  const insertOf = (count) => file.prepare('insert or fail into ' + quote(table) + ' (' + columns.map(quote).join(', ') + ') values ' + Array(count).fill(tuple).join(', '))
  const width = columns.length
  const chunk = Math.max(1, Math.min(workerData.rowsPerStatement, Math.floor(32766 / width)))
  const single = insertOf(1)
  const several = chunk > 1 ? insertOf(chunk) : single
  inserter = file.transaction((values, shared) => {
    if (shared) {
      textsFromBytes(shared.values)
      const upsert = upsertFor(shared.table)
      for (let index = 0; index < shared.values.length; index += 3) upsert.run(shared.values[index], shared.values[index + 1], shared.values[index + 2])
    }
    textsFromBytes(values)
    const rows = values.length / width
    let row = 0
    for (; row + chunk <= rows; row += chunk) several.run(values.slice(row * width, (row + chunk) * width))
    for (; row < rows; row++) single.run(values.slice(row * width, (row + 1) * width))
  })
  inserters.set(name, inserter)
  return inserter
}

parentPort.on('message', (message) => {
  if (message.close) {
    clearInterval(checkpoints)
    file.close()
    process.exit(0)
  }
  const { sequence, table, columns, values, shared } = message
  try {
    inserterFor(table, columns).immediate(values, shared)
    parentPort.postMessage({ sequence })
  } catch (error) {
    parentPort.postMessage({ sequence, error: { code: error && error.code, message: String((error && error.message) || error) } })
  }
})
`
