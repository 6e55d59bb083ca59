/**
 * Goal 5's floor: how long the database alone takes to store the people an import
 * stores, in the same statements (the people plugin's bulk writer, 1,000 rows each) and
 * transactions (one per batch), into a copy of the people table with every one of its
 * indexes. It does not read (no Source_Id lookup, no checks, no HTTP), so the import's
 * time minus the floor is what the service adds. Measured in the same run, since on a
 * shared machine the database's own speed moves from hour to hour.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { sql } from 'kysely'
import { openDatabase, type Database, type Dialect } from '../../kernel/storage/database.ts'
import { bulkWriter, type BulkRow } from '../../plugins/people/bulkWrite.ts'
import { columnsFromInput, rememberingHttpDate } from '../../plugins/people/fields.ts'
import { newPersonColumns, newPersonValues } from '../../plugins/people/import.ts'
import { storedRecords } from '../../plugins/people/storedRecord.ts'
import { databaseUrl } from './settings.ts'

const copy = 'bench_floor_people'

type Kysely = Database['db']

/** The DDL of people and its indexes as SQLite keeps it, with the copy's names (every index of people is named people_...). */
async function sqliteCopyDdl(db: Kysely): Promise<string[]> {
  const { rows } = await sql<{ sql: string }>`select sql from sqlite_master where tbl_name = 'people' and sql is not null order by type desc`.execute(db)
  return rows.map((row) => row.sql.replaceAll('"people', `"${copy}`))
}

/** The number of indexes on `table` (the primary key counted on MySQL, SQLite's own autoindexes too). */
async function indexCount(db: Kysely, dialect: Dialect, table: string): Promise<number> {
  const { rows } = dialect === 'mysql'
    ? await sql<{ count: number }>`select count(distinct index_name) as count from information_schema.statistics where table_schema = database() and table_name = ${table}`.execute(db)
    : await sql<{ count: number }>`select count(*) as count from sqlite_master where type = 'index' and tbl_name = ${table}`.execute(db)
  return Number(rows[0].count)
}

/**
 * Seconds to write `people` (as sent to importmass) in batches of `batchSize`. On MySQL
 * the copy is a table of the service's database; on SQLite it is a file of its own
 * beside the service's (on the same disk), so the floor's writes and its WAL never
 * become work for the service's own next writes.
 */
export async function importFloor(dataDir: string, people: Record<string, unknown>[], batchSize: number): Promise<number> {
  const service = openDatabase({ databaseUrl, dataDir })
  const expected = await indexCount(service.db, service.dialect, 'people')
  const sqliteDdl = service.dialect === 'sqlite' ? await sqliteCopyDdl(service.db) : []
  const scratchDir = service.dialect === 'sqlite' ? mkdtempSync(join(dataDir, 'floor-')) : null
  if (scratchDir) await service.close()
  const database = scratchDir ? openDatabase({ databaseUrl: null, dataDir: scratchDir }) : service
  const { db, dialect } = database
  try {
    await sql.raw(`drop table if exists ${copy}`).execute(db)
    if (dialect === 'mysql') await sql.raw(`create table ${copy} like people`).execute(db)
    else for (const text of sqliteDdl) await sql.raw(text).execute(db)
    const copied = await indexCount(db, dialect, copy)
    if (copied !== expected) throw new Error(`floor: the copy has ${copied} indexes, people ${expected}`)
    const now = Date.now()
    const formatDate = rememberingHttpDate()
    const records = storedRecords(dialect)
    const rows: BulkRow[] = people.map((person) => {
      const columns = columnsFromInput(person)
      if (typeof columns === 'string') throw new Error(`floor: ${columns}`)
      return newPersonValues(columns, 1, 1, 0, now, records, formatDate)
    })
    const bulk = bulkWriter(dialect, copy)
    const started = performance.now()
    for (let at = 0; at < rows.length; at += batchSize) {
      await db.transaction().execute((trx) => bulk.insert(trx, newPersonColumns, rows.slice(at, at + batchSize)))
    }
    return (performance.now() - started) / 1000
  } finally {
    if (!scratchDir) await sql.raw(`drop table if exists ${copy}`).execute(db)
    await database.close()
    if (scratchDir) rmSync(scratchDir, { recursive: true, force: true })
  }
}
