/**
 * The writer thread (kernel/storage/writerThread.ts): the call log's batches are written
 * by a worker thread with a database connection of its own, on SQLite and on MariaDB.
 * What the call log relies on: a batch is written whole, in order; errors come back with
 * their driver's code (an outage is retried, a bad row is not); a thread that dies fails
 * its batches as an outage and the next batch starts a new one; after stop nothing is
 * taken. SQLite's thread also runs the WAL checkpoints.
 */
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Worker } from 'node:worker_threads'
import SQLite from 'better-sqlite3'
import { createConnection } from 'mysql2/promise'
import { sqliteWriterThread } from '../kernel/storage/sqliteWriterThread.ts'
import { mysqlWriterThread } from '../kernel/storage/mysqlWriterThread.ts'
import type { WriterThread } from '../kernel/storage/writerThread.ts'
import { isStoreOutage, isUniqueViolation, mysqlPoolOptions } from '../kernel/storage/database.ts'
import { forEachDatabase, type DatabaseKind } from './helpers/service.ts'
import { createScratchDatabase } from './helpers/scratchDatabase.ts'
import { freePort } from './helpers/freePort.ts'
import { failure } from './helpers/failure.ts'
import { consecutive } from './helpers/consecutive.ts'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

interface Notes {
  /** A writer for the table `notes (id integer primary key, body text)`; stopped at the test's end. */
  writer(options?: { checkpointEveryMs: number | null }): WriterThread
  rows(): Promise<{ id: number; body: string }[]>
}

/** A WAL-mode SQLite file with the notes table; removed at the test's end. */
function sqliteNotes(t: Test): { file: SQLite.Database; path: string } {
  const folder = mkdtempSync(join(tmpdir(), 'keygate-writer-'))
  const path = join(folder, 'writer.sqlite')
  const file = new SQLite(path)
  t.teardown(() => (file.close(), rmSync(folder, { recursive: true, force: true })))
  file.pragma('journal_mode = WAL')
  file.exec('create table notes (id integer primary key, body text not null)')
  return { file, path }
}

async function notesTable(t: Test, kind: DatabaseKind): Promise<Notes> {
  const writers: WriterThread[] = []
  t.teardown(() => Promise.all(writers.map((writer) => writer.stop())))
  const kept = (writer: WriterThread) => (writers.push(writer), writer)
  if (kind === 'sqlite') {
    const { file, path } = sqliteNotes(t)
    return {
      writer: (options = { checkpointEveryMs: null }) => kept(sqliteWriterThread(file, path, options)),
      rows: async () => file.prepare('select id, body from notes order by id').all() as { id: number; body: string }[],
    }
  }
  const scratch = await createScratchDatabase()
  const connection = await createConnection({ ...mysqlPoolOptions(scratch.url), connectionLimit: undefined })
  t.teardown(async () => (await connection.end(), await scratch.drop()))
  await connection.query('create table notes (id bigint primary key, body mediumtext not null) engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin')
  return {
    writer: () => kept(mysqlWriterThread(mysqlPoolOptions(scratch.url))),
    rows: async () => (await connection.query('select id, body from notes order by id'))[0] as { id: number; body: string }[],
  }
}

const columns = ['id', 'body']
const threadOf = (writer: WriterThread) => (writer as unknown as { worker: Worker | null }).worker
/** Ends the thread as a crash would: gone without a word (held meanwhile: an idle thread is unref'd). */
async function crash(thread: Worker): Promise<void> {
  // A timer, not thread.ref(), holds the test process until the thread has exited: a
  // batch answered just before the end makes the writer unref its thread again, and
  // then nothing would be left to wait on and the process would end mid-test (CI, 2026-11-29).
  const holding = setInterval(() => {}, 1000)
  try {
    await thread.terminate()
  } finally {
    clearInterval(holding)
  }
}

t.test('batches are written whole and in order; bytes become text', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const notes = await notesTable(t, kind)
    const writer = notes.writer()
    // 120 rows: full statements (SQLite 32, MySQL 50 rows) and a remainder.
    await writer.insert('notes', columns, Array.from({ length: 120 }, (_, index) => [index + 1, `note ${index + 1}`]).flat())
    await writer.insert('notes', columns, [121, new Uint8Array(Buffer.from('caf\u00e9 \u{1F511}')), 122, Buffer.from('pooled view')])
    const rows = await notes.rows()
    t.equal(rows.length, 122)
    t.same(rows.map((row) => Number(row.id)), Array.from({ length: 122 }, (_, index) => index + 1), 'every row, once')
    t.same(rows[119], { id: 120, body: 'note 120' })
    t.same(rows.slice(120).map((row) => row.body), ['caf\u00e9 \u{1F511}', 'pooled view'], 'bytes stored as their UTF-8 text')
  }),
)

t.test('a bad row fails its batch with its code, and writes none of it', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const notes = await notesTable(t, kind)
    const writer = notes.writer()
    await writer.insert('notes', columns, [1, 'first'])
    const error = await failure(writer.insert('notes', columns, [2, 'second', 1, 'duplicate']))
    t.ok(isUniqueViolation(error), `a unique violation (${error?.code})`)
    t.notOk(isStoreOutage(error), 'not an outage: the call log writes such a batch row by row')
    t.equal((await notes.rows()).length, 1, 'the batch wrote nothing')
    // Inside a multi-row statement (SQLite 32, MySQL 50 rows), and in a later statement
    // of the batch after an earlier one succeeded: the transaction undoes them all.
    for (const batch of [[...consecutive(2, 10), 1, ...consecutive(12, 40)], [...consecutive(2, 60), 1]]) {
      const failed = await failure(writer.insert('notes', columns, batch.flatMap((id) => [id, `note ${id}`])))
      t.ok(isUniqueViolation(failed), `a unique violation (${failed?.code})`)
      t.same((await notes.rows()).map((row) => Number(row.id)), [1], `a batch of ${batch.length} rows wrote none of them`)
    }
  }),
)

t.test('a thread that dies fails its batches as an outage; the next batch starts a new thread', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const notes = await notesTable(t, kind)
    const writer = notes.writer()
    await writer.insert('notes', columns, [1, 'before'])
    const first = threadOf(writer)!
    const inFlight = failure(writer.insert('notes', columns, Array.from({ length: 2000 }, (_, index) => [index + 2, 'x'.repeat(200)]).flat()))
    await crash(first)
    const error = await inFlight
    t.ok(error === null || isStoreOutage(error), `the batch in flight fails as an outage: ${error?.message ?? '(it had been written)'}`)
    const written = (await notes.rows()).length
    t.ok(written === 1 || written === 2001, `the batch is in the table whole or not at all (${written} rows)`)

    await writer.insert('notes', columns, [5000, 'after'])
    t.not(threadOf(writer), first, 'a new thread')
    t.equal((await notes.rows()).at(-1)?.body, 'after')
  }),
)

t.test('after stop, a batch is refused as an outage', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const notes = await notesTable(t, kind)
    const writer = notes.writer()
    await writer.insert('notes', columns, [1, 'kept'])
    await writer.stop()
    t.equal(threadOf(writer), null, 'the thread has ended')
    t.ok(isStoreOutage(await failure(writer.insert('notes', columns, [2, 'refused']))))
    t.equal((await notes.rows()).length, 1)

    // The thread dies while stop waits for a batch still out: stop returns all the same.
    const crashed = notes.writer()
    await crashed.insert('notes', columns, [3, 'kept too'])
    const thread = threadOf(crashed)!
    const outstanding = failure(crashed.insert('notes', columns, Array.from({ length: 2000 }, (_, index) => [index + 10, 'y'.repeat(200)]).flat()))
    const stopping = crashed.stop()
    await crash(thread)
    const started = Date.now()
    await stopping
    t.ok(Date.now() - started < 1000, 'stop returns once the thread is gone')
    const lost = await outstanding
    t.ok(lost === null || isStoreOutage(lost), 'the batch out was written whole or failed as an outage')
  }),
)

t.test('an idle thread never keeps a process alive: one whose database was left open exits by itself', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // The service's database opened, then only the request thread's connection closed
    // (an open MySQL pool holds a process by its sockets): the writer thread, idle, is
    // all that is left open. On SQLite it starts with the database, for the checkpoints,
    // and carries no batch (as in a CLI run whose start failed); on MySQL it starts with
    // the first batch.
    const dataDir = mkdtempSync(join(tmpdir(), 'keygate-writer-'))
    const scratch = kind === 'mysql' ? await createScratchDatabase() : null
    t.teardown(async () => (rmSync(dataDir, { recursive: true, force: true }), await scratch?.drop()))
    const database = fileURLToPath(new URL('../kernel/storage/database.ts', import.meta.url))
    const script = `
      import { openDatabase } from ${JSON.stringify(database)}
      const database = openDatabase({ databaseUrl: ${JSON.stringify(scratch?.url ?? null)}, dataDir: ${JSON.stringify(dataDir)} }, { checkpointInBackground: true })
      if (${JSON.stringify(kind === 'mysql')}) {
        await database.db.schema.createTable('notes').addColumn('id', 'bigint', (c) => c.primaryKey()).addColumn('body', 'text').execute()
        await database.insertMany('notes', [{ id: 1, body: 'written' }])
      }
      await database.db.destroy()
      console.log('left open')`
    const started = Date.now()
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 })
    t.equal(child.stdout.trim(), 'left open', child.stderr)
    t.equal(child.signal, null, 'not killed by the timeout')
    t.equal(child.status, 0, `exited by itself after ${Date.now() - started} ms`)
  }),
)

t.test('SQLite: a locked file makes the batch wait busy_timeout, then fail as an outage', async (t) => {
  const { file, path } = sqliteNotes(t)
  const writer = sqliteWriterThread(file, path, { checkpointEveryMs: null })
  const other = new SQLite(path)
  t.teardown(async () => (await writer.stop(), other.close()))
  other.exec('begin exclusive')
  const started = Date.now()
  const error = await failure(writer.insert('notes', columns, [1, 'locked out']))
  t.ok(isStoreOutage(error), `an outage (${error?.code}) after ${Date.now() - started} ms`)
  other.exec('rollback')
  await writer.insert('notes', columns, [1, 'let in'])
  t.equal((file.prepare('select count(*) as n from notes').get() as { n: number }).n, 1, 'written once the lock is gone')
})

t.test('SQLite: the thread runs the checkpoints, and a lost thread hands them back', async (t) => {
  const { file, path } = sqliteNotes(t)
  const writer = sqliteWriterThread(file, path, { checkpointEveryMs: 50 })
  t.teardown(() => writer.stop())
  t.equal(file.pragma('wal_autocheckpoint', { simple: true }), 0, 'the request thread\'s connection does not checkpoint')
  await crash(threadOf(writer)!)
  t.equal(file.pragma('wal_autocheckpoint', { simple: true }), 1000, 'a lost thread hands them back')
  await writer.insert('notes', columns, [1, 'after'])
  t.equal(file.pragma('wal_autocheckpoint', { simple: true }), 0, 'a new thread takes them again')
})

t.test('MySQL: a server that does not answer fails the batch as an outage', async (t) => {
  const writer = mysqlWriterThread({ ...mysqlPoolOptions('mysql://root@127.0.0.1:3306/none'), port: await freePort(), connectTimeout: 1000 })
  t.teardown(() => writer.stop())
  const error = await failure(writer.insert('notes', columns, [1, 'nowhere']))
  t.ok(isStoreOutage(error), `an outage (${error?.code})`)
})
