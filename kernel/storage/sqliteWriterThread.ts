import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import type SQLite from 'better-sqlite3'

/** Rows bound to one multi-row insert statement (SQLite binds at most 32,766 values). */
const rowsPerStatement = 32

export interface WriterThreadOptions {
  /** Run a PASSIVE WAL checkpoint this often in the thread (the service's database); null: none. */
  checkpointEveryMs: number | null
}

interface Waiting {
  resolve: () => void
  reject: (error: Error) => void
}

/**
 * SQLite's heavy writes, off the request thread (issue 19, goals 1 and 2): a worker
 * thread with a connection of its own writes insertMany's batches (the call log: at
 * LogLevel 2 a row of about 5 KB costs 25 µs of SQLite, more than the rest of the
 * call) and, for the service's database, runs the WAL checkpoints that would otherwise
 * copy and sync pages inside one of the request thread's commits. The request thread
 * only hands over a flat array of values (about 1 µs a row at LogLevel 0, 4 at level 2).
 *
 * Each batch is one IMMEDIATE transaction on the thread's connection, so it waits
 * busy_timeout for another writer rather than failing, and is written whole or not at
 * all; errors come back with their SQLite code, so the call log tells an outage from a
 * bad row as before. Should the thread die, the batches it held fail as an outage (the
 * call log retries them) and the next batch starts a new thread.
 */
export class SqliteWriterThread {
  private worker: Worker | null = null
  private readonly waiting = new Map<number, Waiting>()
  private sequence = 0
  private stopped = false

  constructor(
    private readonly file: SQLite.Database,
    private readonly path: string,
    private readonly options: WriterThreadOptions,
  ) {
    if (options.checkpointEveryMs !== null) this.start()
  }

  /** Writes `values` (rows of `columns.length` values each, flat) into `table`, in one transaction. */
  insert(table: string, columns: readonly string[], values: readonly unknown[]): Promise<void> {
    if (this.stopped) return Promise.reject(outage('the SQLite writer thread is stopped'))
    const worker = this.worker ?? this.start()
    const sequence = ++this.sequence
    return new Promise<void>((resolve, reject) => {
      // While a batch is out, the thread keeps the process alive: a shutdown awaits it.
      if (this.waiting.size === 0) worker.ref()
      this.waiting.set(sequence, { resolve, reject })
      worker.postMessage({ sequence, table, columns, values })
    })
  }

  async stop(): Promise<void> {
    this.stopped = true
    const worker = this.worker
    this.worker = null
    if (!worker) return
    // The call log is flushed before the database closes; a batch still out is let finish.
    const giveUpAt = Date.now() + 10_000
    while (this.waiting.size > 0 && Date.now() < giveUpAt) await new Promise((resolve) => setTimeout(resolve, 5))
    await worker.terminate()
  }

  private start(): Worker {
    // The request thread's connection never checkpoints by itself while the thread does.
    if (this.options.checkpointEveryMs !== null) this.file.pragma('wal_autocheckpoint = 0')
    // Eval'd worker code is CommonJS: it is given the driver's resolved path.
    const driver = createRequire(import.meta.url).resolve('better-sqlite3')
    const worker = new Worker(workerSource, {
      eval: true,
      workerData: { driver, path: this.path, rowsPerStatement, checkpointEveryMs: this.options.checkpointEveryMs },
    })
    worker.unref()
    worker.on('message', (answer: { sequence: number; error?: { code?: string; message: string } }) => {
      const waiting = this.waiting.get(answer.sequence)
      if (!waiting) return
      this.waiting.delete(answer.sequence)
      if (this.waiting.size === 0) worker.unref()
      if (answer.error) waiting.reject(Object.assign(new Error(answer.error.message), { code: answer.error.code }))
      else waiting.resolve()
    })
    const lost = (reason: string) => {
      if (this.worker !== worker) return
      this.worker = null
      // Checkpoints fall back to the request thread's connection.
      if (this.options.checkpointEveryMs !== null && this.file.open) this.file.pragma('wal_autocheckpoint = 1000')
      for (const waiting of this.waiting.values()) waiting.reject(outage(`the SQLite writer thread stopped: ${reason}`))
      this.waiting.clear()
    }
    worker.on('error', (error) => lost(error.message))
    worker.on('exit', (code) => lost(`exit code ${code}`))
    this.worker = worker
    return worker
  }
}

/** Counted as an outage by isStoreOutage: the call log keeps the batch and retries. */
function outage(message: string): Error {
  return Object.assign(new Error(message), { code: 'SQLITE_IOERR' })
}

const workerSource = `
const { workerData, parentPort } = require('node:worker_threads')
const SQLite = require(workerData.driver)
const file = new SQLite(workerData.path)
file.pragma('busy_timeout = 5000')
file.pragma('synchronous = NORMAL')
if (workerData.checkpointEveryMs) {
  file.pragma('wal_autocheckpoint = 0')
  setInterval(() => file.pragma('wal_checkpoint(PASSIVE)'), workerData.checkpointEveryMs)
}

// Prepared once per table and column list; identifiers are the kernel's, values are bound.
const inserters = new Map()
function inserterFor(table, columns) {
  const name = table + '(' + columns.join(',') + ')'
  let inserter = inserters.get(name)
  if (inserter) return inserter
  const quote = (identifier) => '"' + identifier.replaceAll('"', '""') + '"'
  const tuple = '(' + columns.map(() => '?').join(', ') + ')'
  const insertOf = (count) => file.prepare('insert into ' + quote(table) + ' (' + columns.map(quote).join(', ') + ') values ' + Array(count).fill(tuple).join(', '))
  const width = columns.length
  const chunk = Math.max(1, Math.min(workerData.rowsPerStatement, Math.floor(32766 / width)))
  const single = insertOf(1)
  const several = chunk > 1 ? insertOf(chunk) : single
  inserter = file.transaction((values) => {
    // Text given as its UTF-8 bytes (Database.insertMany) is made text here, off the request thread.
    for (let index = 0; index < values.length; index++) {
      const value = values[index]
      if (value instanceof Uint8Array) values[index] = Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8')
    }
    const rows = values.length / width
    let row = 0
    for (; row + chunk <= rows; row += chunk) several.run(values.slice(row * width, (row + chunk) * width))
    for (; row < rows; row++) single.run(values.slice(row * width, (row + 1) * width))
  })
  inserters.set(name, inserter)
  return inserter
}

parentPort.on('message', ({ sequence, table, columns, values }) => {
  try {
    inserterFor(table, columns).immediate(values)
    parentPort.postMessage({ sequence })
  } catch (error) {
    parentPort.postMessage({ sequence, error: { code: error && error.code, message: String((error && error.message) || error) } })
  }
})
`
