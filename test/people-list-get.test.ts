/**
 * D11 names /people/read/list among the listings that take `page`, `size`, `sort` and
 * `filter` as query parameters: besides the POST of interface 4.6, the three list
 * routes answer a GET with everything in the query string, the same listing.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'

t.test('GET /people/read/list, filtered and sorted take their parameters in the query string', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const ids: number[] = []
    for (const [LastName, Dept] of [['Ames', 'Sales'], ['Bell', 'Ops'], ['Cole', 'Sales']]) {
      const created = await service.call('POST', '/People/Update/OneChange', { body: { LastName, Dept } })
      t.equal(created.status, 200)
      ids.push(created.json.Id)
    }
    t.equal((await service.call('POST', '/People/Update/OneRemove', { body: { Id: ids[1] } })).status, 200)

    const page = await service.call('GET', '/people/read/list?page=2&size=1')
    t.equal(page.status, 200)
    t.same(page.json.People.map((person: { LastName: string }) => person.LastName), ['Cole'])
    t.equal(page.json.Total, 2)
    t.equal(page.json.Page, '2 of 2')
    const posted = await service.call('POST', '/people/read/list', { body: { page: 2, size: 1 } })
    t.same(page.json, posted.json, 'the same answer as the POST with the parameters in its body')

    const withDeleted = await service.call('GET', '/people/read/list?IncludeDeleted=1&sort=-LastName')
    t.same(withDeleted.json.People.map((person: { LastName: string }) => person.LastName), ['Cole', 'Bell', 'Ames'])
    t.equal(withDeleted.json.Sort, '-LastName')

    const filtered = await service.call('GET', '/people/read/filtered?filter=Dept%3DSales')
    t.equal(filtered.status, 200)
    t.equal(filtered.json.Total, 2)
    const sorted = await service.call('GET', '/people/read/sorted?sort=-LastName&size=1')
    t.same(sorted.json.People.map((person: { LastName: string }) => person.LastName), ['Cole'])
    t.ok(sorted.json.Next, 'a cursor to the next page')
    const next = await service.call('GET', `/people/read/sorted?sort=-LastName&size=1&after=${encodeURIComponent(sorted.json.Next)}`)
    t.same(next.json.People.map((person: { LastName: string }) => person.LastName), ['Ames'])

    // The routes' own rules and D11's 400s hold on GET as on POST.
    for (const [path, text] of [
      ['/people/read/filtered', 'filter is required'],
      ['/people/read/sorted', 'sort is required'],
      ['/people/read/list?sort=Salary', 'Salary'],
      ['/people/read/list?IncludeDeleted=2', 'IncludeDeleted'],
      ['/people/read/list?size=1001', 'size'],
      ['/people/read/list?colour=red', 'colour'],
    ]) {
      const refused = await service.call('GET', path)
      t.equal(refused.status, 400, path)
      t.match(refused.text, /^Error: /, path)
      t.match(refused.text, text, path)
    }
  }))
