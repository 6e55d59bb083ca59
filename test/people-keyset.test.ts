/**
 * Keyset paging of the people listings (issue 19): `after` = a previous answer's `Next`
 * walks a listing in exactly the order and with exactly the people that page numbers
 * give, for every sortable field both ways (ties and empty fields included), a mixed
 * sort and a filter; the last page has no Next. Page numbers keep working (and stay
 * right after a change, which drops the remembered anchors). Next travels as a field in
 * JSON and XML and as X-Next in CSV. A bad cursor is a 400 that changes nothing.
 */
import t from 'tap'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { sortableFieldNames } from '../plugins/people/listing.ts'

const query = (parameters: Record<string, string | number>) => new URLSearchParams(Object.entries(parameters).map(([name, value]) => [name, String(value)])).toString()

async function listing(service: Service, parameters: Record<string, string | number>) {
  const answer = await service.call('GET', `/People/Read/Missing?${query(parameters)}`)
  if (answer.status !== 200) throw new Error(`${answer.status} ${answer.text}`)
  return answer.json
}

const ids = (people: unknown) => (Array.isArray(people) ? people.map((person: { Id: number }) => person.Id) : [])

/** Every Id of a listing, walked by cursor, page by page. */
async function byCursor(service: Service, parameters: Record<string, string>, size: number) {
  const walked: number[] = []
  const pages: string[] = []
  let after: string | undefined
  for (let guard = 0; guard < 100; guard++) {
    const answer = await listing(service, { ...parameters, size, ...(after ? { after } : {}) })
    walked.push(...ids(answer.People))
    pages.push(answer.Page)
    if (answer.Next === undefined) return { walked, pages }
    after = answer.Next
  }
  throw new Error('Next never ended')
}

/** Every Id of a listing, walked by page number. */
async function byNumber(service: Service, parameters: Record<string, string>, size: number) {
  const walked: number[] = []
  for (let page = 1; ; page++) {
    const answer = await listing(service, { ...parameters, size, page })
    if (!Array.isArray(answer.People)) return walked
    walked.push(...ids(answer.People))
  }
}

t.test('after/Next walks each listing like page numbers do', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const { json: { ImportId } } = await service.call('POST', '/people/update/importinit', { body: {} })
    // 23 people with many ties and empty fields, so Id and the NULL ordering decide often.
    const people = Array.from({ length: 23 }, (_, index) => ({
      Source_Id: `K${index}`, Custno: index % 2, Emp_Id: index % 5 ? String(index % 4) : '', FirstName: ['Ann', 'Bob', ''][index % 3], LastName: `L${index % 4}`,
      Email: index % 3 ? `p${index % 6}@example.com` : '', Dept: ['Sales', 'IT', ''][index % 3], Gender: ['M', 'F', 'U'][index % 3],
      Location: index % 4 ? `Site ${index % 3}` : '', DispGroup: index % 2 ? 'G' : '', NickName: index % 5 ? 'N' : '', Title: index % 3 ? 'T' : '',
      Birthday: index % 4 ? `0000-0${1 + (index % 3)}-10` : '', HireDate: index % 3 ? `2019-0${1 + (index % 2)}-01` : '',
      TermDate: index % 7 === 0 ? '2024-01-31' : '', DateLast: index % 2 ? new Date(1.7e12 + (index % 3) * 6e4).toISOString() : '',
    }))
    const batch = await service.call('POST', '/people/update/importmass', { body: { ImportId, People: people } })
    t.equal(batch.json.Added, 23, batch.text.slice(0, 200))

    const sorts = ['', ...sortableFieldNames.flatMap((name) => [name, `-${name}`]), 'LastName,-HireDate', '-Dept,FirstName,-Id,Email']
    for (const sort of sorts) {
      for (const filter of ['', 'Dept=Sales']) {
        const parameters = { ...(sort ? { sort } : {}), ...(filter ? { filter } : {}) }
        const whole = ids((await listing(service, { ...parameters, size: 1000 })).People)
        const { walked, pages } = await byCursor(service, parameters, 4)
        t.same(walked, whole, `sort '${sort}' filter '${filter}': by cursor, in order, each once`)
        t.same(pages, pages.map((_, index) => `${index + 1} of ${Math.max(1, Math.ceil(whole.length / 4))}`), 'Page counts on')
        t.same(await byNumber(service, parameters, 4), whole, `sort '${sort}' filter '${filter}': by page number`)
      }
    }

    // The list routes take after in the body, like the other parameters.
    const first = await service.call('POST', '/people/read/list', { body: { size: 5, sort: '-LastName' } })
    const second = await service.call('POST', '/people/read/list', { body: { size: 5, sort: '-LastName', after: first.json.Next } })
    const both = await service.call('POST', '/people/read/list', { body: { size: 10, sort: '-LastName' } })
    t.same([...ids(first.json.People), ...ids(second.json.People)], ids(both.json.People), 'POST /people/read/list pages by after')
    t.equal(second.json.Page, '2 of 5')

    // Page numbers after a change: the remembered anchors go with the scope's cached pages.
    const wholeBefore = ids((await listing(service, { size: 1000 })).People)
    t.same(ids((await listing(service, { size: 4, page: 2 })).People), wholeBefore.slice(4, 8))
    const early = await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Aaron', LastName: 'A0' } })
    t.same(ids((await listing(service, { size: 4, page: 2 })).People), wholeBefore.slice(3, 7), 'page 2 moved by the one person sorted first')
    t.equal(ids((await listing(service, { size: 4, page: 1 })).People)[0], early.json.Id)

    // Next in every format: JSON and XML fields, CSV header.
    const json = await listing(service, { size: 3 })
    const csv = await service.call('GET', '/People/Read/Missing?size=3&format=csv')
    t.equal(csv.headers.get('x-next'), json.Next, 'CSV: X-Next')
    const xml = await service.call('GET', '/People/Read/Missing?size=3&format=xml')
    t.match(xml.text, `<Next>${json.Next}</Next>`, 'XML: <Next>')
    const last = await listing(service, { size: 1000 })
    t.notOk('Next' in last, 'no Next on the last page')
    const lastCsv = await service.call('GET', '/People/Read/Missing?size=1000&format=csv')
    t.equal(lastCsv.headers.get('x-next'), null)

    // Bad cursors: 400, Error: ..., nothing else.
    const made = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
    const realCursor = JSON.parse(Buffer.from(json.Next, 'base64url').toString('utf8')) as unknown[]
    t.equal(last.Total, 24)
    for (const [parameters, message] of [
      [{ after: 'not a cursor!' }, /^Error: after 'not a cursor!' is not a cursor of this listing/],
      [{ after: made(['LastName,FirstName', 1, 'x']) }, /^Error: after '.*' is not a cursor of this listing/],
      [{ after: made(['LastName,FirstName', 0, 'x', 'y', 1]) }, /is not a cursor of this listing/],
      [{ after: made(['LastName,FirstName', 3, 'x', 'y', 'one']) }, /is not a cursor of this listing/],
      [{ after: made({ a: 1 }) }, /is not a cursor of this listing/],
      [{ after: Buffer.from('{"').toString('base64url') }, /is not a cursor of this listing/],
      // A real row's key with a position past the listing's Total (24 people): hand-made.
      [{ after: made([...realCursor.slice(0, 1), 25, ...realCursor.slice(2)]) }, /^Error: after '.*' is not a cursor of this listing; use the Next of a previous answer\.$/],
      [{ after: made([...realCursor.slice(0, 1), Number.MAX_SAFE_INTEGER, ...realCursor.slice(2)]) }, /is not a cursor of this listing/],
      [{ after: json.Next, sort: '-Dept' }, /^Error: after was made for sort 'LastName,FirstName', not '-Dept'; keep the sort while paging\.$/],
      [{ after: json.Next, page: 2 }, /^Error: Give either page or after, not both\.$/],
    ] as const) {
      const answer = await service.call('GET', `/People/Read/Missing?${query(parameters as Record<string, string>)}`)
      t.equal(answer.status, 400, answer.text)
      t.match(answer.text, message)
    }
    // Up to the Total is a position a cursor can have (one kept while people before it were removed).
    const atTotal = await listing(service, { size: 3, after: made([realCursor[0], 24, ...realCursor.slice(2)]) })
    t.same(ids(atTotal.People), ids(last.People).slice(3, 6), 'the rows after the key')
  }),
)
