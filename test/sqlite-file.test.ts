/**
 * The SQLite file's settings (kernel/storage/database.ts, issue 19 goal 5): a new data
 * folder's file has 8 KiB pages and the service's connection a page cache of 16 MiB
 * (an import batch of 10,000 people outgrew SQLite's default 2 MB and spilled pages
 * mid-transaction); a file made with 4 KiB pages by an earlier version keeps them and
 * is read and written as before.
 */
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import SQLite from 'better-sqlite3'
import { sql } from 'kysely'
import { openDatabase } from '../kernel/storage/database.ts'

function scratchDir(t: Test): string {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-file-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  return dataDir
}

async function pragma(db: ReturnType<typeof openDatabase>['db'], name: string): Promise<unknown> {
  const { rows } = await sql<Record<string, unknown>>`${sql.raw(`pragma ${name}`)}`.execute(db)
  return rows[0][name]
}

t.test('a new file: 8 KiB pages, WAL, a 16 MiB page cache', async (t) => {
  const dataDir = scratchDir(t)
  const database = openDatabase({ databaseUrl: null, dataDir })
  t.teardown(() => database.close())
  await sql`create table notes (id integer primary key, body text)`.execute(database.db)
  t.equal(await pragma(database.db, 'page_size'), 8192)
  t.equal(await pragma(database.db, 'journal_mode'), 'wal')
  t.equal(await pragma(database.db, 'cache_size'), -16 * 1024, 'in KiB, as SQLite counts a negative size')
})

t.test('a file made with 4 KiB pages keeps them, and its rows', async (t) => {
  const dataDir = scratchDir(t)
  const earlier = new SQLite(join(dataDir, 'keygate.sqlite'))
  earlier.pragma('journal_mode = WAL')
  earlier.exec(`create table notes (id integer primary key, body text); insert into notes (body) values ('kept')`)
  t.equal(earlier.pragma('page_size', { simple: true }), 4096)
  earlier.close()

  const database = openDatabase({ databaseUrl: null, dataDir })
  t.teardown(() => database.close())
  t.equal(await pragma(database.db, 'page_size'), 4096, 'an existing file is not rewritten')
  await sql`insert into notes (body) values ('added')`.execute(database.db)
  const { rows } = await sql<{ body: string }>`select body from notes order by id`.execute(database.db)
  t.same(rows.map((row) => row.body), ['kept', 'added'])
})
