/**
 * The people listings (D11) and single-person updates (D13), on SQLite and MariaDB:
 * every listing case, and the cached listing dropped by each kind of update.
 */
import t from 'tap'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { tenantKey } from './helpers/keys.ts'

async function createPerson(service: Service, fields: Record<string, unknown>, key?: { apiKey: string; secret: string }) {
  const created = await service.call('POST', '/People/Update/OneChange', { body: fields, key })
  if (created.status !== 200) throw new Error(`create failed: ${created.status} ${created.text}`)
  return created.json as { Id: number; [field: string]: unknown }
}

const names = (answer: { People: unknown }) =>
  Array.isArray(answer.People) ? answer.People.map((person: { FirstName: string; LastName: string }) => `${person.FirstName} ${person.LastName}`) : answer.People

t.test('GET /People/Read/Missing: every listing case of D11', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })

    const empty = await service.call('GET', '/People/Read/Missing')
    t.equal(empty.status, 200)
    t.same(empty.json, { Total: 0, Page: '1 of 1', Sort: 'LastName,FirstName', Filter: '', People: 'No people found' })
    const emptyPage3 = await service.call('GET', '/People/Read/Missing?page=3')
    t.same(emptyPage3.json, empty.json, 'nothing matches: Page 1 of 1 whichever page was asked for (D11)')
    const emptyList = await service.call('POST', '/people/read/list', { body: { page: 2 } })
    t.equal(emptyList.json.Page, '1 of 1')

    await createPerson(service, { FirstName: 'Ann', LastName: 'Zed', Dept: 'Sales', Gender: 'F' })
    await createPerson(service, { FirstName: 'Bob', LastName: 'Adams', Dept: 'Sales', Gender: 'M' })
    await createPerson(service, { FirstName: 'Al', LastName: 'Adams', Dept: 'IT' })
    await createPerson(service, { FirstName: 'Has', LastName: 'Photo', Photo: 'https://example.com/p.jpg' })
    const gone = await createPerson(service, { FirstName: 'Gone', LastName: 'Deleted' })
    t.equal((await service.call('POST', '/People/Update/OneRemove', { body: { Id: gone.Id } })).status, 200)

    const all = await service.call('GET', '/People/Read/Missing')
    t.equal(all.json.Total, 3, 'not deleted and without photo')
    t.equal(all.json.Page, '1 of 1')
    t.same(names(all.json), ['Al Adams', 'Bob Adams', 'Ann Zed'], 'default sort LastName,FirstName')
    t.same(Object.keys(all.json), ['Total', 'Page', 'Sort', 'Filter', 'People'])
    t.same(Object.keys(all.json.People[0]), ['Id', 'Emp_Id', 'Created', 'Deleted', 'Parent', 'Custno', 'DispGroup', 'Source_Id', 'Location', 'Email',
      'FirstName', 'LastName', 'NickName', 'Phone', 'Web', 'Photo', 'Gender', 'Dept', 'Title', 'Birthday', 'HireDate', 'TermDate', 'Skip', 'DateLast', 'DateEdit'])
    t.equal(all.json.People[0].Gender, 'U', 'Gender defaults to U')
    t.match(all.json.People[0].Created, /^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/, 'date-times are HTTP-dates')

    const page2 = await service.call('GET', '/People/Read/Missing?page=2&size=2')
    t.equal(page2.json.Page, '2 of 2')
    t.same(names(page2.json), ['Ann Zed'])
    const past = await service.call('GET', '/People/Read/Missing?page=3&size=2')
    t.same({ ...past.json }, { Total: 3, Page: '3 of 2', Sort: 'LastName,FirstName', Filter: '', People: 'No people found' }, 'a page past the end')

    const descending = await service.call('GET', '/People/Read/Missing?sort=-LastName,firstname')
    t.equal(descending.json.Sort, '-LastName,FirstName', 'sort echoed with canonical names')
    t.same(names(descending.json), ['Ann Zed', 'Al Adams', 'Bob Adams'])

    const filtered = await service.call('GET', '/People/Read/Missing?filter=Dept=Sales,Gender=M')
    t.equal(filtered.json.Filter, 'Dept=Sales,Gender=M')
    t.same(names(filtered.json), ['Bob Adams'])
    const none = await service.call('GET', '/People/Read/Missing?filter=Dept=Nowhere')
    t.same(none.json, { Total: 0, Page: '1 of 1', Sort: 'LastName,FirstName', Filter: 'Dept=Nowhere', People: 'No people found' })
    t.equal((await service.call('GET', '/People/Read/Missing?filter=Dept=Nowhere&page=2')).json.Page, '1 of 1')

    for (const [query, message] of [
      ['sort=Salary', /^Error: Unknown sort field 'Salary'/],
      ['sort=LastName,-lastname', /^Error: Sort field 'LastName' is given more than once/],
      ['filter=Salary=1', /^Error: Unknown filter field 'Salary'/],
      ['filter=Deleted=1', /^Error: Unknown filter field 'Deleted'/],
      ['filter=Dept', /^Error: Filter 'Dept' must be Field=value/],
      ['filter=Custno=x', /^Error: Filter field 'Custno' takes a whole number/],
      ['size=1001', /^Error: size must be <= 1000/],
      ['page=0', /^Error: page must be >= 1/],
      ['page=abc', /^Error: page must be an integer/],
      ['color=red', /^Error: color is not a known parameter/],
      // Numbers in plain decimal digits only, as a JSON body takes them: Number() would read these.
      ['size=0x10', /^Error: size must be an integer\.$/],
      ['size=1e2', /^Error: size must be an integer\.$/],
      ['size=%2B1', /^Error: size must be an integer\.$/],
      ['size=%201', /^Error: size must be an integer\.$/],
      ['page=1.0', /^Error: page must be an integer\.$/],
      ['=1', /^Error: A parameter name must not be empty\.$/],
    ] as const) {
      const refused = await service.call('GET', `/People/Read/Missing?${query}`)
      t.equal(refused.status, 400, query)
      t.match(refused.text, message, query)
      t.match(refused.headers.get('content-type'), /^text\/plain/)
    }

    const first = await service.call('GET', '/People/Read/Missing?size=50')
    const again = await service.call('GET', '/People/Read/Missing?size=50')
    t.equal(first.headers.get('x-cache'), null)
    t.equal(again.headers.get('x-cache'), 'HIT', 'cached per scope and parameters')
    t.equal(again.headers.get('x-total-count'), '3')
    t.equal(again.headers.get('x-page'), '1 of 1')
  }),
)

t.test('POST /people/read/list, /filtered, /sorted', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    await createPerson(service, { FirstName: 'Ann', LastName: 'Zed', Dept: 'Sales' })
    await createPerson(service, { FirstName: 'Bob', LastName: 'Adams', Photo: 'photos/bob.jpg' })
    const gone = await createPerson(service, { FirstName: 'Gone', LastName: 'Deleted', Dept: 'Sales' })
    await service.call('POST', '/People/Update/OneRemove', { body: { Id: gone.Id } })

    const list = await service.call('POST', '/people/read/list', { body: {} })
    t.equal(list.status, 200)
    t.same(names(list.json), ['Bob Adams', 'Ann Zed'], 'all current people, with or without photo; deleted ones left out')
    const withDeleted = await service.call('POST', '/people/read/list', { body: { IncludeDeleted: 1 } })
    t.same(names(withDeleted.json), ['Bob Adams', 'Gone Deleted', 'Ann Zed'], 'deleted ones when asked')
    const onlyDeleted = await service.call('POST', '/people/read/list', { body: { filter: 'Deleted=1' } })
    t.same(names(onlyDeleted.json), ['Gone Deleted'], 'a filter on Deleted asks for them too')
    const paged = await service.call('POST', '/people/read/list', { body: { page: 2, size: 1 } })
    t.same([paged.json.Page, names(paged.json)], ['2 of 2', ['Ann Zed']])
    const fromQuery = await service.call('POST', '/people/read/list?size=1', { body: {} })
    t.equal(fromQuery.json.Page, '1 of 2', 'D11 parameters in the query string work as well')
    const twice = await service.call('POST', '/people/read/list?size=1', { body: { size: 2 } })
    t.equal(twice.status, 400)

    const filtered = await service.call('POST', '/people/read/filtered', { body: { filter: 'Dept=Sales', IncludeDeleted: true } })
    t.same(names(filtered.json), ['Gone Deleted', 'Ann Zed'])
    t.match((await service.call('POST', '/people/read/filtered', { body: {} })).text, /^Error: filter is required/)
    for (const [path, body] of [['/people/read/filtered', { filter: ',' }], ['/people/read/filtered', { filter: ' , ' }], ['/people/read/sorted', { sort: ',' }], ['/people/read/sorted', { sort: ' , ' }]] as const) {
      const refused = await service.call('POST', path, { body })
      t.equal(refused.status, 400, `${path} ${JSON.stringify(body)}: only commas name no field`)
      t.equal(refused.text, `Error: ${Object.keys(body)[0]} is required on ${path}.`)
    }
    const sorted = await service.call('POST', '/people/read/sorted', { body: { sort: '-FirstName' } })
    t.same(names(sorted.json), ['Bob Adams', 'Ann Zed'])
    t.match((await service.call('POST', '/people/read/sorted', { body: { sort: 'Nope' } })).text, /^Error: Unknown sort field 'Nope'/)
    t.match((await service.call('POST', '/people/read/sorted', { body: { Sort: 'x' } })).text, /^Error: Sort is not a known field/)
  }),
)

t.test('single-person updates answer the person as stored', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const created = await createPerson(service, {
      FirstName: 'Ann', LastName: 'Lee', Email: 'ann@example.com', Birthday: '0000-02-29', HireDate: '2020-01-15T08:00:00Z',
      DateLast: 'Sun, 22 Nov 2026 08:49:37 GMT', Source_Id: 'HR-1',
    })
    t.match(created, { Parent: 1, Custno: 0, Deleted: 0, Birthday: '0000-02-29', HireDate: '2020-01-15', TermDate: '', DateLast: 'Sun, 22 Nov 2026 08:49:37 GMT', Photo: '' })

    const changed = await service.call('POST', '/People/Update/OneChange', { body: { Id: created.Id, Title: 'Boss', Email: null } })
    t.match(changed.json, { Id: created.Id, FirstName: 'Ann', Title: 'Boss', Email: '' }, 'only the given fields change; null clears')
    // "" clears Gender as it clears every other field: the default U.
    const female = await service.call('POST', '/People/Update/OneChange', { body: { Id: created.Id, Gender: 'F' } })
    t.equal(female.json.Gender, 'F', female.text)
    const cleared = await service.call('POST', '/People/Update/OneChange', { body: { Id: created.Id, Gender: '' } })
    t.equal(cleared.status, 200, cleared.text)
    t.equal(cleared.json.Gender, 'U', 'Gender "" stores the default U')
    t.equal((await service.call('POST', '/People/Update/OneChange', { body: { LastName: 'Blank', Gender: '' } })).json.Gender, 'U', 'also on create')

    const refusals: [unknown, RegExp][] = [
      [{ FirstName: 'No last name' }, /^Error: LastName is required/],
      [{ LastName: 'X', Gender: 'Male' }, /^Error: Gender must be one of M, F, U/],
      [{ LastName: 'X', HireDate: '2021-02-29' }, /^Error: HireDate must be a date/],
      [{ LastName: 'X', Email: 'not an email' }, /^Error: Email must be an e-mail address such as name@example\.com, got 'not an email'\.$/],
      [{ LastName: 'X', Email: 'no-at' }, /^Error: Email must be an e-mail address such as name@example\.com/],
      [{ LastName: 'X', Salary: 1 }, /^Error: Salary is not a known field/],
      [{ LastName: 'X', Source_Id: 'HR-1' }, /^Error: Source_Id 'HR-1' is already used/],
      [{ Id: created.Id, LastName: '' }, /^Error: LastName cannot be emptied/],
      [{ FirstName: 'Blank', LastName: '   ' }, /^Error: LastName is required/],
      [{ Id: created.Id, LastName: ' \t ' }, /^Error: LastName cannot be emptied/],
      [{ LastName: 'X', Source_Id: 'HR-1 \t' }, /^Error: Source_Id 'HR-1' is already used/],
      [{ LastName: 'X', Gender: 'Q' }, /^Error: Gender must be one of M, F, U, "", null\.$/],
      [{ Id: 999999, Title: 'x' }, /^Error: Person 999999 not found/],
    ]
    for (const [body, message] of refusals) {
      const refused = await service.call('POST', '/People/Update/OneChange', { body })
      t.equal(refused.status, (body as { Id?: number }).Id === 999999 ? 404 : 400, JSON.stringify(body))
      t.match(refused.text, message)
    }

    const removed = await service.call('POST', '/People/Update/OneRemove', { body: { Id: created.Id } })
    t.equal(removed.json.Deleted, 1)
    const recalled = await service.call('POST', '/People/Update/OneRecall', { body: { Id: created.Id } })
    t.equal(recalled.json.Deleted, 0)
    const terminated = await service.call('POST', '/People/Update/OneTerminate', { body: { Id: created.Id } })
    t.equal(terminated.json.TermDate, new Date().toISOString().slice(0, 10), 'TermDate defaults to today')
    const dated = await service.call('POST', '/People/Update/OneTerminate', { body: { Id: created.Id, TermDate: '2030-06-30' } })
    t.equal(dated.json.TermDate, '2030-06-30')
    t.equal((await service.call('POST', '/People/Update/OneTerminate', { body: { Id: created.Id, TermDate: 'soon' } })).status, 400)
    const blankDate = await service.call('POST', '/People/Update/OneTerminate', { body: { Id: created.Id, TermDate: '' } })
    t.equal(blankDate.status, 400, 'an empty TermDate does not clear the termination')
    t.equal(blankDate.text, 'Error: TermDate must be a date (YYYY-MM-DD); leave it out for today.')
    const trimmed = await service.call('POST', '/People/Update/OneChange', { body: { Id: created.Id, NickName: 'Annie \r' } })
    t.equal(trimmed.json.NickName, 'Annie', 'text fields are stored without trailing white space')
    t.equal(trimmed.json.TermDate, '2030-06-30', 'the refused terminations changed nothing')
    const nullDate = await service.call('POST', '/People/Update/OneTerminate', { body: { Id: created.Id, TermDate: null } })
    t.equal(nullDate.status, 200, nullDate.text)
    t.equal(nullDate.json.TermDate, new Date().toISOString().slice(0, 10), 'TermDate null means today, as left out')
    t.equal((await service.call('POST', '/People/Update/OneRemove', { body: { Id: 424242 } })).status, 404)
  }),
)

t.test('every kind of update drops the cached listings at once', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const customerKey = await tenantKey(service, 1, 7)
    const person = await createPerson(service, { FirstName: 'Cat', LastName: 'Stevens', Source_Id: 'S-1' }, customerKey)

    // Both the customer's own key and the parent-wide root key (Custno 0) see this person.
    async function primeBoth() {
      for (const key of [undefined, customerKey]) {
        await service.call('GET', '/People/Read/Missing', { key })
        t.equal((await service.call('GET', '/People/Read/Missing', { key })).headers.get('x-cache'), 'HIT')
      }
    }
    async function expectFresh(what: string, check: (answer: any) => boolean) {
      for (const key of [undefined, customerKey]) {
        const answer = await service.call('GET', '/People/Read/Missing', { key })
        t.equal(answer.headers.get('x-cache'), null, `${what}: ${key ? 'Custno 7' : 'Custno 0'} cache dropped`)
        t.ok(check(answer.json), `${what}: ${key ? 'Custno 7' : 'Custno 0'} sees the change`)
      }
    }
    const updates: [string, () => Promise<unknown>, (answer: any) => boolean][] = [
      ['OneChange (create)', () => createPerson(service, { FirstName: 'New', LastName: 'Person', Custno: 7 }), (answer) => answer.Total === 2],
      ['OneChange (change)', () => service.call('POST', '/People/Update/OneChange', { body: { Id: person.Id, Title: 'Singer' } }),
        (answer) => answer.People.some((p: { Title: string }) => p.Title === 'Singer')],
      ['OnePhoto', () => service.call('POST', '/People/Update/OnePhoto', { body: { Id: person.Id, Photo: 'https://example.com/cat.jpg' } }), (answer) => answer.Total === 1],
      ['OnePhoto (cleared)', () => service.call('POST', '/People/Update/OnePhoto', { body: { Id: person.Id, Photo: '' } }), (answer) => answer.Total === 2],
      ['OneRemove', () => service.call('POST', '/People/Update/OneRemove', { body: { Id: person.Id } }), (answer) => answer.Total === 1],
      ['OneRecall', () => service.call('POST', '/People/Update/OneRecall', { body: { Id: person.Id } }), (answer) => answer.Total === 2],
      ['OneTerminate', () => service.call('POST', '/People/Update/OneTerminate', { body: { Id: person.Id, TermDate: '2031-01-01' } }),
        (answer) => answer.People.some((p: { TermDate: string }) => p.TermDate === '2031-01-01')],
    ]
    let importId = 0
    updates.push(['importmass', async () => {
      importId = (await service.call('POST', '/people/update/importinit', { body: {}, key: customerKey })).json.ImportId
      return service.call('POST', '/people/update/importmass', { key: customerKey, body: { ImportId: importId, People: [{ Source_Id: 'S-1', LastName: 'Stevens', FirstName: 'Yusuf' }] } })
    }, (answer) => answer.People.some((p: { FirstName: string }) => p.FirstName === 'Yusuf')])
    updates.push(['importterm', () => service.call('POST', '/people/update/importterm', { key: customerKey, body: { ImportId: importId } }),
      (answer) => answer.People.some((p: { FirstName: string; TermDate: string }) => p.FirstName === 'New' && p.TermDate !== '')])
    for (const [what, update, check] of updates) {
      await primeBoth()
      await update()
      await expectFresh(what, check)
    }
  }),
)

t.test('a date given as an RFC 3339 date-time is the calendar day as written in its offset; an HTTP-date its GMT day', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const person = await createPerson(service, {
      LastName: 'Offset', Birthday: '1990-11-27T23:00:00-05:00', HireDate: '2020-03-01T00:30:00+02:00', TermDate: 'Sat, 28 Nov 2026 01:00:00 GMT',
    })
    t.match(person, { Birthday: '1990-11-27', HireDate: '2020-03-01', TermDate: '2026-11-28' })
    // A Birthday keeps any year as a date-time too, as it does as a plain date (1900-02-29).
    const leapless = await service.call('POST', '/People/Update/OneChange', { body: { Id: person.Id, Birthday: '1900-02-29T00:00:00Z' } })
    t.equal(leapless.status, 200, leapless.text)
    t.equal(leapless.json.Birthday, '1900-02-29')
    t.equal((await service.call('POST', '/People/Update/OneChange', { body: { Id: person.Id, Birthday: '1900-02-30T00:00:00Z' } })).status, 400, 'no 30 February in any year')
    t.equal((await service.call('POST', '/People/Update/OneChange', { body: { Id: person.Id, HireDate: '1900-02-29T00:00:00Z' } })).status, 400, 'other dates are real days')
    const terminated = await service.call('POST', '/People/Update/OneTerminate', { body: { Id: person.Id, TermDate: '2026-12-31T23:30:00-05:00' } })
    t.equal(terminated.json.TermDate, '2026-12-31')
    const importId = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    const batch = await service.call('POST', '/people/update/importmass', {
      body: { ImportId: importId, Csv: 'Source_Id,LastName,HireDate\nO1,Imported,2021-06-30T22:00:00-07:00\nO2,Leap,2021-02-29T10:00:00+01:00\n' },
    })
    t.match(batch.json, { Added: 1, Rejected: 1, Rejections: [{ Row: 2, Reason: /^HireDate must be a date/ }] }, batch.text)
    const imported = (await service.call('POST', '/people/read/filtered', { body: { filter: 'Source_Id=O1' } })).json.People[0]
    t.equal(imported.HireDate, '2021-06-30')
  }),
)
