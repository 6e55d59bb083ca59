/**
 * The people plugin's bulk writer (plugins/people/bulkWrite.ts), which imports write
 * with: 1,000 rows a statement, inside the caller's transaction. What an import relies
 * on ("never half-written"): a row that fails in any statement of a batch, the first or
 * a later one, leaves nothing of the batch, on both databases. On SQLite the statements
 * are `insert or fail` (no statement journal): a failed one keeps the rows it wrote
 * before the failure, and only the transaction's rollback takes them away again.
 */
import t, { type Test } from 'tap'
import { sql } from 'kysely'
import { openDatabase, isUniqueViolation, type Database } from '../kernel/storage/database.ts'
import { bulkWriter, rowsPerStatement } from '../plugins/people/bulkWrite.ts'
import { forEachDatabase, type DatabaseKind } from './helpers/service.ts'
import { createScratchDatabase, scratchSqlite } from './helpers/scratchDatabase.ts'
import { failure } from './helpers/failure.ts'
import { consecutive } from './helpers/consecutive.ts'

const table = 'bulk_people'
const columns = ['parent', 'custno', 'source_id', 'last_name']

async function scratch(t: Test, kind: DatabaseKind): Promise<Database> {
  let database: Database
  if (kind === 'sqlite') {
    database = scratchSqlite(t, 'bulk')
  } else {
    const scratchDatabase = await createScratchDatabase()
    database = openDatabase({ databaseUrl: scratchDatabase.url, dataDir: '' })
    t.teardown(async () => (await database.close(), await scratchDatabase.drop()))
  }
  await sql.raw(`create table ${table} (id integer primary key ${kind === 'mysql' ? 'auto_increment' : ''}, parent integer not null, custno integer not null, source_id varchar(64) not null, last_name varchar(100) not null)`).execute(database.db)
  // people_source_id (0001): what the upsert's conflict names.
  await sql.raw(`create unique index ${table}_source_id on ${table} (parent, custno, source_id)`).execute(database.db)
  return database
}

const person = (index: number, lastName = `Last${index}`) => ({ parent: 1, custno: 1, source_id: `S${index}`, last_name: lastName })

async function stored(database: Database): Promise<{ source_id: string; last_name: string }[]> {
  const { rows } = await sql<{ source_id: string; last_name: string }>`select source_id, last_name from ${sql.table(table)} order by id`.execute(database.db)
  return rows
}

t.test('a batch that fails in any of its statements writes none of its rows', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const database = await scratch(t, kind)
    const bulk = bulkWriter(database.dialect, table)
    await database.db.transaction().execute((trx) => bulk.insert(trx, columns, [person(0)]))

    const batches = {
      'in the middle of the first statement': [...consecutive(1, 500), 0, ...consecutive(501, 700)],
      'in a later statement, after a full one succeeded': [...consecutive(1, rowsPerStatement + 200), 0],
    }
    for (const [where, indexes] of Object.entries(batches)) {
      const failed = await failure(database.db.transaction().execute((trx) => bulk.insert(trx, columns, indexes.map((index) => person(index)))))
      t.ok(isUniqueViolation(failed), `${where}: a unique violation (${failed?.code})`)
      t.same((await stored(database)).map((row) => row.source_id), ['S0'], `${where}: none of the ${indexes.length} rows is stored`)
    }

    const upserted = consecutive(0, rowsPerStatement + 10).map((index) => person(index, `New${index}`))
    await database.db.transaction().execute((trx) => bulk.upsert(trx, columns, ['last_name'], upserted))
    const rows = await stored(database)
    t.equal(rows.length, rowsPerStatement + 10, 'an upsert over two statements stores every row once')
    t.same(rows[0], { source_id: 'S0', last_name: 'New0' }, 'the row already there is updated')
  }),
)
