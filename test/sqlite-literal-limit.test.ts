/**
 * A SQLite query's LIMIT is written into its SQL text (kernel/storage/sqliteLiteralLimit.ts):
 * SQLite plans a statement again on every run that binds its LIMIT, so a cached
 * statement with `limit ?` was compiled anew each time (a people page: 134 against
 * 104 µs, a page after a key 200 against 115). Only a whole number is written; anything
 * else, and OFFSET, stays a parameter. The rows are the same either way.
 */
import t from 'tap'
import { sql } from 'kysely'
import { openDatabase } from '../kernel/storage/database.ts'
import { scratchSqlite } from './helpers/scratchDatabase.ts'

t.test('SQLite: a whole-number LIMIT is in the text, anything else is bound', async (t) => {
  const database = scratchSqlite(t, 'limit')
  const db = database.db.withTables<{ numbers: { id: number; name: string } }>()
  await sql`create table numbers (id integer primary key, name text)`.execute(db)
  for (let id = 1; id <= 5; id++) await db.insertInto('numbers').values({ id, name: `n${id}` }).execute()

  const limited = db.selectFrom('numbers').select('id').where('id', '>', 1).orderBy('id').limit(2)
  const compiled = limited.compile()
  t.match(compiled.sql, /limit 2$/, 'the limit is a number in the SQL')
  t.same(compiled.parameters, [1], 'and not a parameter')
  t.same(await limited.execute(), [{ id: 2 }, { id: 3 }], 'the same rows')
  t.same(await db.selectFrom('numbers').select('id').limit(0).execute(), [], 'limit 0: no rows')

  const paged = db.selectFrom('numbers').select('id').orderBy('id').limit(2).offset(3).compile()
  t.match(paged.sql, /limit 2 offset \?$/, 'OFFSET stays bound (SQLite does not plan it again)')
  t.same(paged.parameters, [3])
  t.same((await db.executeQuery(paged)).rows, [{ id: 4 }, { id: 5 }])

  // A value that is not a whole number is left to SQLite, bound, as before.
  for (const odd of [2.5, -1, Number.MAX_SAFE_INTEGER + 2]) {
    const kept = db.selectFrom('numbers').select('id').limit(odd).compile()
    t.match(kept.sql, /limit \?$/, `${odd} stays a parameter`)
    t.same(kept.parameters, [odd])
  }
  const inTransaction = await db.transaction().execute(async (trx) => trx.selectFrom('numbers').select('id').orderBy('id', 'desc').limit(1).compile().sql)
  t.match(inTransaction, /limit 1$/, 'in a transaction too')
})

t.test('MySQL keeps its LIMIT bound (mysql2 writes every value into the text itself)', async (t) => {
  const database = openDatabase({ databaseUrl: 'mysql://root@127.0.0.1:1/none', dataDir: '/nonexistent' })
  t.teardown(() => database.close())
  const compiled = database.db.selectFrom('api_keys').select('id').limit(3).compile()
  t.match(compiled.sql, /limit \?$/)
  t.same(compiled.parameters, [3])
})
