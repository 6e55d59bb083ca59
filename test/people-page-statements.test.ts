/**
 * A people listing's statements are compiled once per shape and run with each call's
 * values (plugins/people/pageStatements.ts). Each statement run must be exactly what the
 * listing builder (listingQueries, EXPLAINed by people-explain.test.ts) compiles for that
 * call: the same SQL and the same parameters, on SQLite (LIMIT in the text) and MySQL,
 * for every set, a parent-wide and a customer scope, sorts both ways, filters with values
 * and empty (IS NULL), keys with and without NULLs, and a second call of the same shape
 * with other values (so no value of the first call is kept). The answers over real
 * databases are covered by people-keyset.test.ts and the other listing tests.
 */
import t from 'tap'
import {
  CompiledQuery, Kysely, MysqlAdapter, MysqlIntrospector, MysqlQueryCompiler, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler,
  type DatabaseConnection, type Dialect as KyselyDialect, type Driver, type QueryResult,
} from 'kysely'
import { sqliteLiteralLimit } from '../kernel/storage/sqliteLiteralLimit.ts'
import type { Dialect } from '../kernel/storage/database.ts'
import { listingQueries, planListing, type ListingSet } from '../plugins/people/listing.ts'
import { PageStatements } from '../plugins/people/pageStatements.ts'
import type { KeyValue } from '../plugins/people/cursor.ts'
import type { PeopleDb, Scope } from '../plugins/people/scope.ts'

/** A Kysely whose connection records every statement it is given and answers `rows`. */
function recordingDb(dialect: Dialect) {
  const seen: CompiledQuery[] = []
  let rows: Record<string, unknown>[] = []
  const connection: DatabaseConnection = {
    async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
      seen.push(query)
      return { rows: rows as R[] }
    },
    // eslint-disable-next-line require-yield
    async *streamQuery() { throw new Error('not used') },
  }
  const driver: Driver = {
    async init() {},
    async acquireConnection() { return connection },
    async beginTransaction() {},
    async commitTransaction() {},
    async rollbackTransaction() {},
    async releaseConnection() {},
    async destroy() {},
  }
  const kyselyDialect: KyselyDialect = dialect === 'sqlite'
    ? { createAdapter: () => new SqliteAdapter(), createDriver: () => driver, createIntrospector: (db) => new SqliteIntrospector(db), createQueryCompiler: () => new SqliteQueryCompiler() }
    : { createAdapter: () => new MysqlAdapter(), createDriver: () => driver, createIntrospector: (db) => new MysqlIntrospector(db), createQueryCompiler: () => new MysqlQueryCompiler() }
  const db = new Kysely<any>({ dialect: kyselyDialect, plugins: dialect === 'sqlite' ? [sqliteLiteralLimit] : [] }) as unknown as PeopleDb
  return {
    db,
    /** The one statement the call ran (answered with `answer`). */
    async ranBy(answer: Record<string, unknown>[], call: () => Promise<unknown>) {
      seen.length = 0
      rows = answer
      await call()
      if (seen.length !== 1) throw new Error(`${seen.length} statements ran`)
      return { sql: seen[0].sql, parameters: [...seen[0].parameters] }
    },
  }
}

const built = (query: { compile(): CompiledQuery }) => {
  const compiled = query.compile()
  return { sql: compiled.sql, parameters: [...compiled.parameters] }
}

const sets: ListingSet[] = ['missing photo', 'current', 'current and deleted']
const sorts = ['', 'LastName,FirstName', '-LastName', 'Birthday', '-Birthday', 'Dept,-HireDate', '-Dept,FirstName,-Id,Email', 'Id', '-Created']
const filters = ['', 'Dept=Sales', 'Dept=', 'Custno=7,Location=', 'Title=Boss,Gender=f,Deleted=0']

/** Keys of the sort's key columns: all values, all NULL, and mixed; two of each, with other values. */
function keysFor(columns: number, round: number): KeyValue[][] {
  const value = (index: number) => (index === columns - 1 ? 100 + index + round : `v${index}-${round}`)
  return [
    Array.from({ length: columns }, (_, index) => value(index)),
    Array.from({ length: columns }, (_, index) => (index === columns - 1 ? 5 + round : null)),
    Array.from({ length: columns }, (_, index) => (index % 2 === 0 && index !== columns - 1 ? null : value(index))),
  ]
}

for (const dialect of ['sqlite', 'mysql'] as const) {
  t.test(`${dialect}: each statement run is the one the listing builder compiles for that call`, async (t) => {
    const { db, ranBy } = recordingDb(dialect)
    const statements = new PageStatements(db, dialect)
    let checked = 0
    for (const set of sets) {
      for (const sort of sorts) {
        for (const filter of filters) {
          if (set !== 'current and deleted' && filter.includes('Deleted')) continue
          for (const size of [1, 100]) {
            for (const round of [0, 1]) {
              const scope: Scope = round === 0 ? { parent: 3, custno: 0 } : { parent: 4 + round, custno: round === 1 ? 9 : 0 }
              const plan = planListing({ sort, filter: filter.replace('Sales', `Sales${round}`), size }, { allowDeletedFilter: true })
              const reads = statements.reads(scope, set, plan)
              const builder = listingQueries(db, dialect, scope, set, plan)
              const columns = plan.order.length
              t.same(await ranBy([{ total: 3 }], () => reads.count()), built(builder.count))
              t.same(await ranBy([], () => reads.keyAt(40 + round)), built(builder.keyAt(40 + round)))
              t.same(await ranBy([{}], () => reads.keyOfPerson(77 + round)), built(builder.keyOfPerson(77 + round)))
              for (const key of [null, ...keysFor(columns, round)]) {
                const page = dialect === 'sqlite' ? builder.pageTexts(key) : builder.pageColumns(key)
                t.same(await ranBy([], () => reads.page(key)), built(page), `${set} | ${sort} | ${filter} | ${size} | ${JSON.stringify(key)}`)
                checked++
              }
            }
          }
        }
      }
    }
    t.ok(checked > 500, `${checked} pages checked`)
  })
}

t.test('the values of one call are not kept for the next of the same shape', async (t) => {
  const { db, ranBy } = recordingDb('sqlite')
  const statements = new PageStatements(db, 'sqlite')
  const plan = (filter: string) => planListing({ sort: 'Dept', filter }, { allowDeletedFilter: false })
  const first = await ranBy([], () => statements.reads({ parent: 1, custno: 2 }, 'current', plan('Dept=A')).page(['A', 10]))
  const second = await ranBy([], () => statements.reads({ parent: 5, custno: 6 }, 'current', plan('Dept=B')).page(['B', 20]))
  t.equal(first.sql, second.sql, 'one statement for the shape')
  t.not(JSON.stringify(first.parameters), JSON.stringify(second.parameters))
  for (const value of [5, 6, 'B', 20]) t.ok(second.parameters.includes(value), `the second call's ${value}`)
  for (const value of [1, 2, 'A', 10]) t.notOk(second.parameters.includes(value), `not the first call's ${value}`)
})
