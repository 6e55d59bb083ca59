/**
 * Every people listing is served by an index (issue 19): the queries the listing routes
 * run, built by the very builder they use (listingQueries), are EXPLAINed on SQLite and
 * MariaDB for every sortable field both ways and the default sort, every listing set,
 * a parent-wide and a one-customer scope: the first page, a keyset page after a real
 * row, the lookup of a page's last key, a page number's anchor and the Total. None may scan the table (SQLite `SCAN
 * people`, MariaDB type ALL), and none may sort for ORDER BY on SQLite (`USE TEMP B-TREE
 * FOR ORDER BY`) or, for a parent-wide key, on MariaDB (`Using filesort`).
 * MariaDB weighs its statistics: for one customer's 2,000 people, or for an anchor's
 * one-time OFFSET walk (remembered afterwards), it may sort a covering range or walk the
 * primary key in order instead; those choices are listed as comments, not failures.
 */
import t from 'tap'
import { CompiledQuery, type Compilable } from 'kysely'
import { forEachDatabase, startService, type DatabaseKind } from './helpers/service.ts'
import { listingQueries, planListing, sortableFieldNames, type ListingSet } from '../plugins/people/listing.ts'
import type { PeopleDb } from '../plugins/people/scope.ts'
import type { PeopleTables } from '../plugins/people/tables.ts'

/** Why a plan is not an index seek in order (`scan` when it reads the whole table), or null when it is. */
async function planProblem(db: PeopleDb, kind: DatabaseKind, query: Compilable): Promise<{ scan: boolean; text: string } | null> {
  const compiled = query.compile()
  const explain = kind === 'sqlite' ? 'explain query plan ' : 'explain '
  const { rows } = await db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(explain + compiled.sql, [...compiled.parameters]))
  if (kind === 'sqlite') {
    const steps = rows.map((row) => String(row.detail))
    const bad = steps.filter((step) => /^SCAN people\b/.test(step) || /TEMP B-TREE FOR (RIGHT PART OF )?ORDER BY/.test(step))
    return bad.length === 0 ? null : { scan: steps.some((step) => /^SCAN people\b/.test(step)), text: `${steps.join(' | ')}\n  ${compiled.sql}` }
  }
  const bad = rows.filter((row) => row.type === 'ALL' || row.type === 'index' || /filesort|temporary/i.test(String(row.Extra ?? '')))
  return bad.length === 0 ? null : { scan: rows.some((row) => row.type === 'ALL'), text: `${rows.map((row) => `${row.type} ${row.key} ${row.Extra}`).join(' | ')}\n  ${compiled.sql}` }
}

const people = (from: number, count: number) => Array.from({ length: count }, (_, offset) => {
  const index = from + offset
  return {
    Source_Id: `X${index}`, Custno: 7 + (index % 3), Emp_Id: String(index * 37 % 1009), FirstName: `F${index % 53}`, LastName: `L${index % 211}`,
    Email: index % 4 === 0 ? '' : `p${index}@example.com`, Dept: ['Sales', 'IT', 'HR', ''][index % 4], Gender: ['M', 'F', 'U'][index % 3],
    Location: `Site ${index % 7}`, DispGroup: `G${index % 5}`, NickName: index % 2 ? `N${index}` : '', Title: `T${index % 11}`,
    Birthday: `1990-0${1 + (index % 9)}-1${index % 10}`, HireDate: `2015-0${1 + (index % 9)}-0${1 + (index % 9)}`,
    TermDate: index % 9 === 0 ? '2024-01-31' : '', DateLast: index % 3 ? new Date(1.7e12 + index * 6e4).toISOString() : '',
    Photo: index % 10 === 0 ? `https://photos.example/${index}.jpg` : '',
  }
})

t.test('every listing query seeks an index in order, on both databases', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    // Enough people (three customers of one parent) that MariaDB weighs its indexes as in use.
    const { json: { ImportId } } = await service.call('POST', '/people/update/importinit', { body: {} })
    for (let from = 0; from < 6000; from += 3000) {
      const batch = await service.call('POST', '/people/update/importmass', { body: { ImportId, People: people(from, 3000) } })
      t.equal(batch.json.Added, 3000, batch.text.slice(0, 200))
    }
    const db = service.kernel.database.db.withTables<PeopleTables>() as unknown as PeopleDb
    if (kind === 'mysql') await db.executeQuery(CompiledQuery.raw('analyze table people'))

    const sorts = ['', ...sortableFieldNames.flatMap((name) => [name, `-${name}`])]
    const sets: ListingSet[] = ['missing photo', 'current', 'current and deleted']
    const scopes = [{ parent: 1, custno: 0 }, { parent: 1, custno: 8 }]
    const problems: string[] = []
    const mariadbChoices: string[] = []
    let checked = 0
    for (const scope of scopes) {
      for (const set of sets) {
        for (const sort of sorts) {
          const plan = planListing({ sort, size: 100 }, { allowDeletedFilter: true })
          const queries = listingQueries(db, kind, scope, set, plan)
          const page = queries.readsTexts ? queries.pageTexts : queries.pageColumns
          const first = await page(null).execute()
          t.ok(first.length > 0, `${set} ${sort}: people to page through`)
          const lastId = Number(first[first.length - 2].id)
          const after = queries.keyOf(await queries.keyOfPerson(lastId).executeTakeFirstOrThrow())
          const queried: [string, Compilable][] = [
            ['first page', page(null)], ['keyset page', page(after)], ['anchor of page 30', queries.keyAt(2899)], ['Total', queries.count],
          ]
          if (queries.readsTexts) queried.push(['key of the last row', queries.keyOfPerson(lastId)], ['first page body', queries.pageBody(null)], ['keyset page body', queries.pageBody(after)])
          for (const [what, query] of queried) {
            const problem = await planProblem(db, kind, query)
            checked++
            if (!problem) continue
            const text = `custno ${scope.custno}, ${set}, sort '${plan.sortText}', ${what}: ${problem.text}`
            const costChoice = kind === 'mysql' && !problem.scan && (scope.custno !== 0 || what === 'anchor of page 30')
            ;(costChoice ? mariadbChoices : problems).push(text)
          }
        }
      }
    }
    for (const choice of mariadbChoices) t.comment(`MariaDB's choice: ${choice.split('\n')[0]}`)
    t.same(problems, [], `${checked} plans, none scans the table or sorts`)
  }),
)
