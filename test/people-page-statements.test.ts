/**
 * A people listing's statements are compiled once per shape and run with each call's
 * values (plugins/people/pageStatements.ts). Each statement run must be exactly what the
 * listing builder (listingQueries, EXPLAINed by people-explain.test.ts) compiles for that
 * call: the same SQL and the same parameters, on SQLite (LIMIT in the text) and MySQL,
 * for every set, a parent-wide and a customer scope, sorts both ways, filters with values
 * and empty (IS NULL), keys with and without NULLs, and a second call of the same shape
 * with other values (so no value of the first call is kept). Over real SQLite and
 * MariaDB, every page of many shapes, walked by cursor and by number, is the plain
 * in-memory sort and filter of the people, and its body is its records' texts byte for byte.
 */
import t from 'tap'
import {
  CompiledQuery, Kysely, MysqlAdapter, MysqlIntrospector, MysqlQueryCompiler, SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler,
  type DatabaseConnection, type Dialect as KyselyDialect, type Driver, type QueryResult,
} from 'kysely'
import { sqliteLiteralLimit } from '../kernel/storage/sqliteLiteralLimit.ts'
import type { Dialect } from '../kernel/storage/database.ts'
import { listingQueries, planListing, runListing, type ListedPage, type ListingMemo, type ListingSet } from '../plugins/people/listing.ts'
import { PageStatements } from '../plugins/people/pageStatements.ts'
import { BodyPieces, bodyBytes } from '../kernel/http/bodyPieces.ts'
import { decodeCursor, type KeyValue } from '../plugins/people/cursor.ts'
import type { PeopleDb, Scope } from '../plugins/people/scope.ts'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'

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
                if (dialect === 'sqlite') t.same(await ranBy([], () => reads.pageBody(key)), built(builder.pageBody(key)), `body: ${set} | ${sort} | ${filter} | ${size} | ${JSON.stringify(key)}`)
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

t.test('on SQLite a page whose people all have stored texts is one statement, its People the bytes SQLite joined, sent as they are', async (t) => {
  const { db, ranBy } = recordingDb('sqlite')
  const statements = new PageStatements(db, 'sqlite')
  const plan = planListing({ sort: 'Id', size: 2 }, { allowDeletedFilter: false })
  const reads = statements.reads({ parent: 1, custno: 0 }, 'current', plan)
  // Total and anchors come from the memo; what is left is the page itself.
  const remember: ListingMemo = async (name, compute) => (name.startsWith('total|') ? 5 as never : compute())
  const joined = '{"Id":4,"FirstName":"A"},{"Id":9,"FirstName":"Zoë"}'
  // better-sqlite3 gives the BLOB as a Buffer.
  const joinedBytes = Buffer.from(joined)
  const page = [{ body: joinedBytes, listed: 2, stored: 2, id: null }, { body: null, listed: null, stored: null, id: 9 }, { body: null, listed: null, stored: null, id: 12 }]
  let listed: ListedPage | undefined
  t.same(await ranBy(page, async () => { listed = await runListing(db, reads, 'current', plan, remember) }), built(listingQueries(db, 'sqlite', { parent: 1, custno: 0 }, 'current', plan).pageBody(null)), 'only the page body statement ran')
  const answer = JSON.parse(listed!.body.text)
  t.same(answer.People, [{ Id: 4, FirstName: 'A' }, { Id: 9, FirstName: 'Zoë' }], "People is SQLite's joined text")
  t.match(listed!.body.text, `,"People":[${joined}]}`)
  const sent = listed!.body.body()
  t.ok(sent instanceof BodyPieces && sent.pieces.includes(joinedBytes), "a json answer sends SQLite's bytes themselves, not a copy")
  t.equal(bodyBytes(sent).toString(), listed!.body.text, 'and with them the whole answer')
  t.equal(answer.Page, '1 of 3')
  t.same(decodeCursor(answer.Next, 'Id', plan.order).key, [9], "Next is the key of the page's last person")
  // The last page: only the row at the page's end, no row after it.
  const end = [{ body: joinedBytes, listed: 2, stored: 2, id: null }, { body: null, listed: null, stored: null, id: 9 }]
  let final: ListedPage | undefined
  await ranBy(end, async () => { final = await runListing(db, reads, 'current', { ...plan, page: 3 }, async (name, compute) => (name.startsWith('total|') ? 6 as never : name.startsWith('anchor|') ? [8] as never : compute())) })
  t.equal(final!.Next, undefined, 'no Next when no row follows the page')
})

// Over real databases: every page of many listing shapes, walked by cursor and by page
// number on the routes (which run the compiled statements), is the plain in-memory sort
// and filter of the people, and a second walk of the same shapes (statements now
// compiled) answers the very same bytes.

type Person = Record<string, string | number | null>

/** Sorts like both databases (ASCII values here): NULL first ascending, last descending; Id last, the way the last field runs. */
function expected(people: Person[], sort: string, filter: [string, string | null][]): number[] {
  const order = sort.split(',').filter(Boolean).map((item) => ({ field: item.replace(/^-/, ''), down: item.startsWith('-') }))
  if (!order.some((item) => item.field === 'Id')) order.push({ field: 'Id', down: order[order.length - 1].down })
  const compare = (a: Person, b: Person) => {
    for (const { field, down } of order) {
      const x = a[field]
      const y = b[field]
      if (x === y) continue
      const up = x === null ? -1 : y === null ? 1 : x < y ? -1 : 1
      return down ? -up : up
    }
    return 0
  }
  // An empty field is NULL in the database and "" in the record.
  return people.filter((person) => filter.every(([field, value]) => (person[field] ?? '') === (value ?? ''))).sort(compare).map((person) => Number(person.Id))
}

async function list(service: Service, body: Record<string, unknown>) {
  const answer = await service.call('POST', '/people/read/list', { body })
  if (answer.status !== 200) throw new Error(`${answer.status} ${answer.text}`)
  return answer
}

t.test('every page of many listing shapes is the in-memory sort and filter, by cursor and by number', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const { json: { ImportId } } = await service.call('POST', '/people/update/importinit', { body: {} })
    const imported = Array.from({ length: 19 }, (_, index) => ({
      Source_Id: `S${index}`, FirstName: ['Ann', 'Bob', ''][index % 3], LastName: `L${index % 4}`, Email: index % 3 ? `p${index % 5}@example.com` : '',
      Dept: ['Sales', 'IT', ''][index % 3], Location: index % 4 ? `Site ${index % 3}` : '', Title: index % 2 ? 'T' : '',
      // Texts JSON escapes, for the check that a page's People is its records' texts byte for byte.
      NickName: index % 2 ? `"Q" \\ é 😀 </script> \u2028 ${index}` : '',
    }))
    t.equal((await service.call('POST', '/people/update/importmass', { body: { ImportId, People: imported } })).json.Added, 19)
    // Two deleted people, written straight (nothing is cached yet), for the IncludeDeleted set.
    const all = (await list(service, { size: 1000, sort: 'Id' })).json.People as Person[]
    const deleted = [Number(all[2].Id), Number(all[7].Id)]
    await service.kernel.database.db.updateTable('people' as never).set({ deleted: 1 } as never).where('id' as never, 'in', deleted as never).execute()
    const current = all.filter((person) => !deleted.includes(Number(person.Id)))

    const sorts = ['', 'LastName,FirstName', '-LastName', 'FirstName', '-FirstName', 'Email', '-Email', 'Dept,-Location', '-Dept,FirstName,-Id,Email', 'Title,-Email', 'Id', '-Id']
    const filters: [string, [string, string | null][]][] = [['', []], ['Dept=Sales', [['Dept', 'Sales']]], ['Dept=', [['Dept', null]]], ['Location=,Title=T', [['Location', null], ['Title', 'T']]]]
    for (const round of [1, 2]) {
      for (const includeDeleted of [false, true]) {
        for (const sort of sorts) {
          for (const [filter, conditions] of filters) {
            const want = expected(includeDeleted ? all : current, sort || 'LastName,FirstName', conditions)
            const base = { sort, filter, ...(includeDeleted ? { IncludeDeleted: 1 } : {}) }
            const what = `round ${round}, ${includeDeleted ? 'with deleted' : 'current'}, sort '${sort}', filter '${filter}'`
            for (const size of [3, 1000]) {
              const byCursor: number[] = []
              const byNumber: number[] = []
              let after: string | undefined
              for (let page = 1; page < 30; page++) {
                const numbered = await list(service, { ...base, size, page })
                const cursored = await list(service, { ...base, size, ...(after ? { after } : {}) })
                // The People JSON is exactly the records' own texts, one after another.
                for (const answer of [numbered, cursored]) {
                  const { People, ...head } = answer.json
                  const people = Array.isArray(People) ? `[${People.map((person: Person) => JSON.stringify(person)).join(',')}]` : JSON.stringify(People)
                  t.equal(answer.text, `${JSON.stringify(head).slice(0, -1)},"People":${people}}`)
                }
                t.equal(cursored.text, numbered.text, `${what}, size ${size}: page ${page} by cursor is page ${page} by number`)
                if (Array.isArray(numbered.json.People)) byNumber.push(...numbered.json.People.map((person: Person) => Number(person.Id)))
                if (Array.isArray(cursored.json.People)) byCursor.push(...cursored.json.People.map((person: Person) => Number(person.Id)))
                after = cursored.json.Next
                if (after === undefined) break
              }
              t.same(byCursor, want, `${what}, size ${size}: by cursor`)
              t.same(byNumber, want, `${what}, size ${size}: by number`)
            }
          }
        }
      }
    }
    if (kind === 'sqlite') {
      // What the route runs reaches JavaScript as SQLite's bytes (the BLOB), never as a string.
      const db = service.kernel.database.db as unknown as PeopleDb
      const { parent } = await db.selectFrom('people').select('parent').executeTakeFirstOrThrow()
      const [records] = await new PageStatements(db, 'sqlite').reads({ parent: Number(parent), custno: 0 }, 'current', planListing({}, { allowDeletedFilter: false })).pageBody(null)
      t.ok(Buffer.isBuffer(records.body), 'a page body is read as bytes')
      t.match(String(records.body), /^\{"Id":\d+,/, 'its records, joined')
    }
  }))
