/**
 * SQLite's writer thread (kernel/storage/sqliteWriterThread.ts): the call log's batches
 * are written by a worker thread with a connection of its own. What the call log relies
 * on: a batch is written whole, in order; errors come back with their SQLite code (an
 * outage is retried, a bad row is not); a thread that dies fails its batches as an
 * outage and the next batch starts a new one; after stop nothing is taken.
 */
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Worker } from 'node:worker_threads'
import SQLite from 'better-sqlite3'
import { SqliteWriterThread } from '../kernel/storage/sqliteWriterThread.ts'
import { isStoreOutage, isUniqueViolation } from '../kernel/storage/database.ts'

function scratchFile(t: Test) {
  const folder = mkdtempSync(join(tmpdir(), 'keygate-writer-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  const path = join(folder, 'writer.sqlite')
  const file = new SQLite(path)
  file.pragma('journal_mode = WAL')
  file.exec('create table notes (id integer primary key, body text not null)')
  t.teardown(() => file.close())
  return { path, file }
}

const columns = ['id', 'body']
const count = (file: SQLite.Database) => (file.prepare('select count(*) as n from notes').get() as { n: number }).n
/** The thread as a crash would leave it: gone without a word. */
const threadOf = (writer: SqliteWriterThread) => (writer as unknown as { worker: Worker | null }).worker

t.test('batches are written whole and in order; bytes become text', async (t) => {
  const { path, file } = scratchFile(t)
  const writer = new SqliteWriterThread(file, path, { checkpointEveryMs: null })
  t.teardown(() => writer.stop())
  // 70 rows: two full statements of 32 and 6 more one by one.
  await writer.insert('notes', columns, Array.from({ length: 70 }, (_, index) => [index + 1, `note ${index + 1}`]).flat())
  await writer.insert('notes', columns, [71, new Uint8Array(Buffer.from('caf\u00e9 \u{1F511}'))])
  const rows = file.prepare('select id, body from notes order by id').all() as { id: number; body: string }[]
  t.equal(rows.length, 71)
  t.same(rows[69], { id: 70, body: 'note 70' })
  t.same(rows[70], { id: 71, body: 'caf\u00e9 \u{1F511}' }, 'bytes stored as their UTF-8 text')
})

t.test('a bad row fails its batch with its code, and writes none of it', async (t) => {
  const { path, file } = scratchFile(t)
  const writer = new SqliteWriterThread(file, path, { checkpointEveryMs: null })
  t.teardown(() => writer.stop())
  await writer.insert('notes', columns, [1, 'first'])
  const error = await writer.insert('notes', columns, [2, 'second', 1, 'duplicate']).catch((caught: unknown) => caught)
  t.ok(isUniqueViolation(error), `a unique violation (${(error as { code?: string }).code})`)
  t.notOk(isStoreOutage(error), 'not an outage: the call log writes such a batch row by row')
  t.equal(count(file), 1, 'the batch wrote nothing')
})

t.test('a locked file: the batch waits busy_timeout, then fails as an outage', async (t) => {
  const { path, file } = scratchFile(t)
  const writer = new SqliteWriterThread(file, path, { checkpointEveryMs: null })
  t.teardown(() => writer.stop())
  const other = new SQLite(path)
  t.teardown(() => other.close())
  other.exec('begin exclusive')
  const started = Date.now()
  const error = await writer.insert('notes', columns, [1, 'locked out']).catch((caught: unknown) => caught)
  t.ok(isStoreOutage(error), `an outage (${(error as { code?: string }).code}) after ${Date.now() - started} ms`)
  other.exec('rollback')
  await writer.insert('notes', columns, [1, 'let in'])
  t.equal(count(file), 1, 'written once the lock is gone')
})

t.test('a thread that dies fails its batches as an outage; the next batch starts a new thread', async (t) => {
  const { path, file } = scratchFile(t)
  const writer = new SqliteWriterThread(file, path, { checkpointEveryMs: 50 })
  t.teardown(() => writer.stop())
  t.equal(file.pragma('wal_autocheckpoint', { simple: true }), 0, 'checkpoints are the thread\'s')
  await writer.insert('notes', columns, [1, 'before'])
  const first = threadOf(writer)!
  const inFlight = writer.insert('notes', columns, Array.from({ length: 2000 }, (_, index) => [index + 2, 'x'.repeat(200)]).flat())
  await first.terminate()
  const error = await inFlight.catch((caught: unknown) => caught)
  t.ok(isStoreOutage(error), `the batch in flight fails as an outage: ${(error as Error).message}`)
  t.equal(file.pragma('wal_autocheckpoint', { simple: true }), 1000, 'checkpoints fall back to the request thread\'s connection')
  const written = count(file)
  t.ok(written === 1 || written === 2001, `the batch is in the table whole or not at all (${written} rows)`)

  await writer.insert('notes', columns, [5000, 'after'])
  t.not(threadOf(writer), first, 'a new thread')
  t.equal(file.pragma('wal_autocheckpoint', { simple: true }), 0, 'which takes the checkpoints back')
  t.equal((file.prepare('select body from notes where id = 5000').get() as { body: string }).body, 'after')
})

t.test('after stop, a batch is refused as an outage', async (t) => {
  const { path, file } = scratchFile(t)
  const writer = new SqliteWriterThread(file, path, { checkpointEveryMs: null })
  await writer.insert('notes', columns, [1, 'kept'])
  await writer.stop()
  const error = await writer.insert('notes', columns, [2, 'refused']).catch((caught: unknown) => caught)
  t.ok(isStoreOutage(error))
  t.equal(count(file), 1)
})
