/**
 * SQLite's row objects (kernel/storage/database.ts): better-sqlite3 answers arrays and
 * `rowBuilder` makes each into an object with one literal compiled per statement. What
 * every query relies on: each column under its own name, in select order, with its
 * value; a repeated name keeps its first place and its last value (as SQLite's own
 * objects do); any name is a plain key, even one that looks like code; `__proto__` is
 * an own property, never the row's prototype.
 */
import t from 'tap'
import { sql } from 'kysely'
import { rowBuilder, valueLister, valueListers } from '../kernel/storage/database.ts'
import { scratchSqlite } from './helpers/scratchDatabase.ts'

const oddNames = ['plain', 'with "quotes"', 'back\\slash', 'line\u2028separator', '}; throw new Error("ran"); ({', 'naïve 名前', '0', 'constructor']

t.test('rowBuilder: every name is a key of its own, in order, with its value', async (t) => {
  const row = rowBuilder(oddNames)(oddNames.map((_, index) => index * 10))
  t.same(Object.keys(row), ['0', ...oddNames.filter((name) => name !== '0')], 'the names, in select order (an integer-like key first, as in any object)')
  oddNames.forEach((name, index) => t.equal(row[name], index * 10, `name ${index} holds its value`))
  t.equal(Object.getPrototypeOf(row), Object.prototype)

  const repeated = rowBuilder(['id', 'name', 'id'])([1, 'Ann', 3])
  t.same(Object.entries(repeated), [['id', 3], ['name', 'Ann']], 'a repeated name keeps its first place and its last value')

  const prototypeNamed = rowBuilder(['__proto__', 'id'])([{ polluted: true }, 7])
  t.equal(Object.getPrototypeOf(prototypeNamed), Object.prototype, '__proto__ never becomes the prototype')
  t.same(Object.keys(prototypeNamed), ['__proto__', 'id'])
  t.same(Object.getOwnPropertyDescriptor(prototypeNamed, '__proto__')?.value, { polluted: true }, '__proto__ is an own property with the value')
  t.equal((prototypeNamed as { polluted?: boolean }).polluted, undefined)
})

t.test('valueLister, the inverse: every row\'s values in column order, absent as NULL', async (t) => {
  const names = oddNames.filter((name) => name !== 'constructor')
  const rows = [rowBuilder(names)(names.map((_, index) => index)), rowBuilder(names)(names.map((_, index) => `v${index}`))]
  t.same(valueLister(names)(rows), [...names.map((_, index) => index), ...names.map((_, index) => `v${index}`)], 'odd names are plain keys, in the given order')
  t.same(valueLister(['b', 'missing', 'a'])([{ a: 1, b: 2 }, { a: 3, b: undefined }]), [2, null, 1, null, null, 3], 'absent and undefined values are NULL')
  t.same(valueLister(['a', 'b'], (value) => (value === null ? 'none' : value))([{ a: 1 }]), [1, 'none'], 'each value passes through `each`')
  t.same(valueLister(['__proto__', 'id'])([rowBuilder(['__proto__', 'id'])(['own', 7])]), ['own', 7], 'an own __proto__ is read as itself')

  const listers = valueListers(undefined, 2)
  t.equal(listers(['a', 'b']), listers(['a', 'b']), 'one compiled lister per column list')
  t.not(listers(['a', 'b']), listers(['b', 'a']))
  t.same(listers(['a,b'])([{ 'a,b': 1, a: 2, b: 3 }]), [1], 'a name holding a comma is one column')
  t.same(listers(['a', 'b'])([{ 'a,b': 1, a: 2, b: 3 }]), [2, 3], 'and not the same list as its parts')
})

t.test('rows of a real SQLite query: wide, odd names, repeated names and __proto__', async (t) => {
  const database = scratchSqlite(t, 'rows')
  const db = database.db
  await sql`create table wide (id integer primary key, ${sql.join(Array.from({ length: 30 }, (_, index) => sql.raw(`c${index} text`)))})`.execute(db)
  for (let id = 1; id <= 3; id++) {
    await sql`insert into wide values (${id}, ${sql.join(Array.from({ length: 30 }, (_, index) => (index % 4 === 0 ? null : `${id}-${index}`)))})`.execute(db)
  }
  const { rows } = await sql<Record<string, unknown>>`select * from wide order by id`.execute(db)
  t.equal(rows.length, 3)
  rows.forEach((row, at) => {
    t.same(Object.keys(row), ['id', ...Array.from({ length: 30 }, (_, index) => `c${index}`)], `row ${at + 1}: 31 columns in order`)
    t.equal(row.id, at + 1)
    t.equal(row.c0, null)
    t.equal(row.c29, `${at + 1}-29`)
  })

  const odd = await sql<Record<string, unknown>>`select ${sql.join(oddNames.map((name, index) => sql`${index} as ${sql.id(name)}`))}`.execute(db)
  oddNames.forEach((name, index) => t.equal(odd.rows[0][name], index, `column ${index}`))

  const repeated = await sql<Record<string, unknown>>`select 1 as id, 'Ann' as name, 3 as id`.execute(db)
  t.same(Object.entries(repeated.rows[0]), [['id', 3], ['name', 'Ann']])

  const named = await sql<Record<string, unknown>>`select 'x' as "__proto__", 5 as id`.execute(db)
  t.equal(Object.getPrototypeOf(named.rows[0]), Object.prototype)
  t.equal(Object.getOwnPropertyDescriptor(named.rows[0], '__proto__')?.value, 'x')
  t.equal(named.rows[0].id, 5)

  // The same statement again comes from the statement cache with the same builder.
  const again = await sql<Record<string, unknown>>`select * from wide where id = ${2}`.execute(db)
  t.equal(again.rows[0].c1, '2-1')
})
