/**
 * Bulk import (D13): importinit -> importmass batches (JSON or CSV, up to 10,000 rows,
 * upsert on Source_Id, each bad row reported by number, never half-written) ->
 * importterm (terminate the scope's people not delivered, answer the counts).
 * A 10,000-row JSON batch is ~2.5 MB: the route takes up to 8 MiB, above the 1 MiB default.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'
import { tenantKey } from './helpers/keys.ts'
import { sql } from '../kernel/sdk.ts'

function employee(index: number): Record<string, unknown> {
  return {
    Source_Id: `E${String(index).padStart(5, '0')}`, Emp_Id: String(index), FirstName: `First${index}`, LastName: `Last${index % 977}`,
    Email: `person${index}@example.com`, Dept: ['Sales', 'IT', 'HR'][index % 3], Gender: ['M', 'F', 'U'][index % 3], HireDate: '2019-04-01',
  }
}

t.test('a 10,000-row batch with bad rows, then a CSV re-import and importterm', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const first = await service.call('POST', '/people/update/importinit', { body: {} })
    t.equal(first.status, 200)
    t.match(first.json, { ImportId: Number })
    const importId = first.json.ImportId

    const rows: unknown[] = Array.from({ length: 10_000 }, (_, index) => employee(index + 1))
    const bad: Record<number, [unknown, RegExp]> = {
      17: [{ ...employee(17), LastName: undefined }, /^LastName is required\.$/],
      500: [{ ...employee(500), Gender: 'X' }, /^Gender must be one of M, F, U/],
      1234: [{ ...employee(1234), HireDate: '2021-13-01' }, /^HireDate must be a date/],
      2222: [{ ...employee(2222), Email: 'no-at' }, /^Email must be an e-mail address such as name@example\.com, got 'no-at'\.$/],
      5000: [{ ...employee(4999) }, /^Source_Id 'E04999' repeats row 4999 of this batch\.$/],
      7777: [{ ...employee(7777), Salary: 1 }, /^Salary is not a known field\.$/],
      8000: [{ ...employee(8000), Source_Id: '' }, /^Source_Id is required\.$/],
      9999: ['not a person', /^The row is not an object\.$/],
    }
    for (const [row, [value]] of Object.entries(bad)) rows[Number(row) - 1] = value
    const started = Date.now()
    const batch = await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, People: rows } })
    t.comment(`${kind}: 10,000-row batch in ${Date.now() - started} ms`)
    t.equal(batch.status, 200, batch.text.slice(0, 200))
    t.match(batch.json, { ImportId: importId, Batch: 1, Rows: 10_000, Added: 9_992, Changed: 0, Unchanged: 0, Rejected: 8 })
    t.same(batch.json.Rejections.map((rejection: { Row: number }) => rejection.Row), Object.keys(bad).map(Number), 'each bad row by its number, in order')
    for (const rejection of batch.json.Rejections) t.match(rejection.Reason, bad[rejection.Row][1], `row ${rejection.Row}`)
    t.equal(batch.json.Rejections[0].Source_Id, 'E00017', 'a rejection names the Source_Id when it has one')

    const listed = await service.call('GET', '/People/Read/Missing?size=1')
    t.equal(listed.json.Total, 9_992, 'every good row is there, none of the bad ones')
    const notWritten = await service.call('POST', '/people/read/filtered', { body: { filter: 'Source_Id=E00500' } })
    t.equal(notWritten.json.People, 'No people found', 'a bad row is not half-written')
    const counts = await service.call('POST', '/people/update/importterm', { body: { ImportId: importId } })
    t.match(counts.json, { ImportId: importId, Batches: 1, Added: 9_992, Changed: 0, Unchanged: 0, Terminated: 0, Rejected: 8 })
    t.same(counts.json.Rejections.map((rejection: { Batch: number; Row: number }) => [rejection.Batch, rejection.Row]), Object.keys(bad).map((row) => [1, Number(row)]))

    // The next sync comes as CSV: one changed, one unchanged, one new, one bad row.
    const second = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    const csv = [
      'Source_Id,FirstName,LastName,Email,Dept,Gender,HireDate,Emp_Id',
      'E00001,First1,Last1,person1@example.com,Sales,F,2019-04-01,1', // changed: Dept IT -> Sales
      'E00002,First2,Last2,person2@example.com,HR,U,2019-04-01,2', // unchanged
      'N00001,New,Hire,new@example.com,IT,U,2026-01-05,N1', // new
      'N00002,Too,Few', // bad: too few fields
      'N00003,,,x@example.com,IT,U,,', // bad: no LastName
    ].join('\r\n')
    const csvBatch = await service.call('POST', '/people/update/importmass', { body: { ImportId: second, Csv: csv } })
    t.equal(csvBatch.status, 200, csvBatch.text)
    t.match(csvBatch.json, { Batch: 1, Rows: 5, Added: 1, Changed: 1, Unchanged: 1, Rejected: 2 })
    t.same(csvBatch.json.Rejections.map((rejection: { Row: number }) => rejection.Row), [4, 5], 'CSV rows are numbered from the line after the header')
    t.match(csvBatch.json.Rejections[0].Reason, /Too few fields/)
    const changed = (await service.call('POST', '/people/read/filtered', { body: { filter: 'Source_Id=E00001' } })).json.People[0]
    t.equal(changed.Dept, 'Sales')
    const ended = await service.call('POST', '/people/update/importterm', { body: { ImportId: second } })
    t.match(ended.json, { Batches: 1, Added: 1, Changed: 1, Unchanged: 1, Terminated: 9_992 - 2, Rejected: 2 })
    const stillHere = await service.call('POST', '/people/read/list', { body: { filter: 'TermDate=', size: 10 } })
    t.same(stillHere.json.People.map((person: { Source_Id: string }) => person.Source_Id).sort(), ['E00001', 'E00002', 'N00001'], 'only the people of the last import are not terminated')
    t.match((await service.call('POST', '/people/update/importmass', { body: { ImportId: second, People: [] } })).text, /^Error: Import \d+ is already finished\.$/)
    t.equal((await service.call('POST', '/people/update/importterm', { body: { ImportId: second } })).status, 400)
  }),
)

t.test('importterm drops the cached listings of the customers whose people it terminates', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const customer7 = await tenantKey(service, 1, 7)
    const sync = async (people: object[]) => {
      const importId = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
      const batch = await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, People: people } })
      t.equal(batch.status, 200, batch.text)
      return (await service.call('POST', '/people/update/importterm', { body: { ImportId: importId } })).json
    }
    const stays = { Source_Id: 'A', LastName: 'Stays', Custno: 7 }
    const goes = { Source_Id: 'B', LastName: 'Goes', Custno: 7 }
    const elsewhere = { Source_Id: 'C', LastName: 'Elsewhere', Custno: 8 }
    t.match(await sync([stays, goes, elsewhere]), { Added: 3, Terminated: 0 })
    const termDates = async (key?: typeof customer7) => {
      const listed = await service.call('GET', '/People/Read/Missing', { key })
      t.equal(listed.status, 200, listed.text)
      return Object.fromEntries(listed.json.People.map((person: { LastName: string; TermDate: string }) => [person.LastName, person.TermDate]))
    }
    // Both listings are now cached: the customer's own and the parent-wide one.
    t.same(await termDates(customer7), { Goes: '', Stays: '' })
    t.same(await termDates(), { Elsewhere: '', Goes: '', Stays: '' })
    t.same(await termDates(customer7), { Goes: '', Stays: '' }, 'served again (from the cache)')

    t.match(await sync([stays, elsewhere]), { Unchanged: 2, Terminated: 1 })
    const mine = await termDates(customer7)
    t.match(mine, { Goes: /^\d{4}-\d\d-\d\d$/, Stays: '' }, "the customer's listing shows the termination")
    t.same(await termDates(), { Elsewhere: '', Goes: mine.Goes, Stays: '' }, 'so does the parent-wide one')

    t.match(await sync([stays, elsewhere]), { Unchanged: 2, Terminated: 0 }, 'a roster that terminates nobody')
    t.same(await termDates(customer7), mine)
  }),
)

t.test('a row with a control character is rejected alone, in JSON and CSV, and the rest of the batch is written', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const importId = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    const people = [
      { Source_Id: 'G1', LastName: 'Good' },
      { Source_Id: 'C1', LastName: 'Ctl\u0001' },
      { Source_Id: 'C\u0002', LastName: 'Bad id' },
      { Source_Id: 'L'.repeat(300), LastName: 'Long id' },
      { Source_Id: 'G2', LastName: 'Good too' },
    ]
    const batch = await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, People: people } })
    t.equal(batch.status, 200, batch.text)
    t.match(batch.json, { Rows: 5, Added: 2, Rejected: 3 })
    t.same(batch.json.Rejections.map((rejection: { Row: number }) => rejection.Row), [2, 3, 4], 'numbered from 1, as every rejection')
    t.match(batch.json.Rejections[0], { Source_Id: 'C1', Reason: 'LastName must not contain control characters.' })
    t.match(batch.json.Rejections[1], { Source_Id: '', Reason: 'Source_Id must not contain control characters.' }, 'a Source_Id breaking the text rule is not echoed')
    t.match(batch.json.Rejections[2], { Row: 4, Source_Id: 'L'.repeat(100), Reason: /^Source_Id must be at most 100 characters/ }, 'a long Source_Id is named by its first 100 characters')
    const csv = 'Source_Id,LastName\r\nG3,Fine\r\nC3,Ctl\u0007\r\n'
    const csvBatch = await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, Csv: csv } })
    t.equal(csvBatch.status, 200, csvBatch.text)
    t.match(csvBatch.json, { Added: 1, Rejected: 1, Rejections: [{ Row: 2, Source_Id: 'C3', Reason: 'LastName must not contain control characters.' }] })
    const xml = await service.call('POST', '/people/update/importterm?format=xml', { body: { ImportId: importId } })
    t.equal(xml.status, 200, 'the stored rejections answer in XML too')
    t.match(xml.text, /<Rejection>\s*<Batch>1<\/Batch>\s*<Row>2<\/Row>/, 'one <Rejection> element per rejection')
    t.notMatch(xml.text, /<Rejections>/)
    t.equal((await service.call('GET', '/People/Read/Missing')).json.Total, 3)
    const refused = await service.call('POST', '/people/update/importmass', { body: { ImportId: 'x\u0001', People: [] } })
    t.equal(refused.status, 400, 'the rest of the body keeps the text rule')
  }),
)

t.test('batches refused whole', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const importId = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    const refusals: [unknown, number, RegExp][] = [
      [{ ImportId: importId, People: Array.from({ length: 10_001 }, () => ({})) }, 400, /^Error: People must have at most 10000 items/],
      [{ ImportId: importId, Csv: 'Source_Id,LastName\r\n' + 'A,B\r\n'.repeat(10_001) }, 400, /^Error: A batch holds at most 10000 rows; this one has 10001\.$/],
      [{ ImportId: importId, Csv: 'Source_Id,LastName,Salary\r\nA,B,1' }, 400, /^Error: Unknown CSV column 'Salary'/],
      [{ ImportId: importId, People: [], Csv: '' }, 400, /^Error: Send either People/],
      [{ ImportId: importId }, 400, /^Error: Send either People/],
      [{ ImportId: 123456, People: [] }, 404, /^Error: Import 123456 not found\.$/],
      [{ People: [] }, 400, /^Error: ImportId is required\.$/],
    ]
    for (const [body, status, message] of refusals) {
      const refused = await service.call('POST', '/people/update/importmass', { body })
      t.equal(refused.status, status)
      t.match(refused.text, message)
    }
    t.equal((await service.call('GET', '/People/Read/Missing')).json.Total, 0, 'nothing written')
    const empty = await service.call('POST', '/people/update/importterm', { body: { ImportId: importId } })
    t.equal(empty.status, 400)
    t.match(empty.text, /refusing to terminate everyone/)
  }),
)

// MariaDB's collations ignore trailing spaces in the unique (customer, Source_Id) key;
// SQLite's do not. Trailing white space is dropped, so "E1 " is "E1" on both and a batch is never
// refused whole by the key for a row the plugin took for new.
t.test('a Source_Id with trailing spaces is the same Source_Id', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const first = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    t.match((await service.call('POST', '/people/update/importmass', { body: { ImportId: first, People: [{ Source_Id: 'E1', LastName: 'One' }] } })).json, { Added: 1 })
    const second = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    const batch = await service.call('POST', '/people/update/importmass', {
      body: { ImportId: second, People: [{ Source_Id: 'E1 ', LastName: 'Uno' }, { Source_Id: 'E2\t', LastName: 'Two ' }, { Source_Id: 'E2', LastName: 'Dos' }] },
    })
    t.equal(batch.status, 200, batch.text)
    t.match(batch.json, { Added: 1, Changed: 1, Rejected: 1 })
    t.match(batch.json.Rejections[0], { Row: 3, Source_Id: 'E2', Reason: "Source_Id 'E2' repeats row 2 of this batch." })
    const listed = (await service.call('GET', '/People/Read/Missing')).json.People
    t.same(listed.map((person: { Source_Id: string; LastName: string }) => [person.Source_Id, person.LastName]), [['E2', 'Two'], ['E1', 'Uno']])
  }),
)

// docs/people.md: a removed person stays removed when an import delivers them again.
t.test('an import that delivers a removed person changes their fields and keeps them removed', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const first = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    t.match((await service.call('POST', '/people/update/importmass', { body: { ImportId: first, People: [{ Source_Id: 'R1', LastName: 'Removed' }, { Source_Id: 'R2', LastName: 'Kept' }] } })).json, { Added: 2 })
    const listed = (await service.call('GET', '/People/Read/Missing')).json.People
    const removed = listed.find((person: { Source_Id: string }) => person.Source_Id === 'R1')
    t.equal((await service.call('POST', '/People/Update/OneRemove', { body: { Id: removed.Id } })).status, 200)
    const second = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    t.match((await service.call('POST', '/people/update/importmass', { body: { ImportId: second, People: [{ Source_Id: 'R1', LastName: 'Again' }, { Source_Id: 'R2', LastName: 'Kept' }] } })).json, { Changed: 1, Unchanged: 1 })
    t.same((await service.call('GET', '/People/Read/Missing')).json.People.map((person: { Source_Id: string }) => person.Source_Id), ['R2'], 'not listed again')
    const all = (await service.call('POST', '/people/read/list', { body: { IncludeDeleted: 1 } })).json.People
    t.match(all.find((person: { Source_Id: string }) => person.Source_Id === 'R1'), { LastName: 'Again', Deleted: 1 })
    t.match((await service.call('POST', '/People/Update/OneRecall', { body: { Id: removed.Id } })).json, { LastName: 'Again', Deleted: 0 })
  }),
)

// docs/people.md: "an empty cell clears that field". A CSV cell is never null, so an empty
// Gender cell (and JSON's "") must clear Gender to its default U, not reject the row.
t.test('an empty Gender cell or "" clears Gender (U), in CSV and JSON', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const first = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    const csv = ['Source_Id,LastName,Gender,Birthday,Email', 'G1,One,F,,', 'G2,Two,,,', 'G3,Three,X,,'].join('\n')
    const csvBatch = await service.call('POST', '/people/update/importmass', { body: { ImportId: first, Csv: csv } })
    t.equal(csvBatch.status, 200, csvBatch.text)
    t.match(csvBatch.json, { Rows: 3, Added: 2, Rejected: 1 }, 'only the row with a real bad Gender is rejected')
    t.match(csvBatch.json.Rejections[0], { Row: 3, Source_Id: 'G3', Reason: 'Gender must be one of M, F, U, "", null.' })
    const json = await service.call('POST', '/people/update/importmass', {
      body: { ImportId: first, People: [{ Source_Id: 'J1', LastName: 'Json', Gender: '' }, { Source_Id: 'J2', LastName: 'Null', Gender: null }] },
    })
    t.equal(json.status, 200, json.text)
    t.match(json.json, { Added: 2, Rejected: 0 })
    const genders = async () => Object.fromEntries((await service.call('GET', '/People/Read/Missing')).json.People
      .map((person: { Source_Id: string; Gender: string }) => [person.Source_Id, person.Gender]))
    t.same(await genders(), { G1: 'F', G2: 'U', J1: 'U', J2: 'U' })
    t.match((await service.call('POST', '/people/update/importterm', { body: { ImportId: first } })).json, { Terminated: 0 })

    // The next sync empties G1's cell: she changes to U; G2's empty cell again is no change.
    const second = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    const again = await service.call('POST', '/people/update/importmass', {
      body: { ImportId: second, Csv: 'Source_Id,LastName,Gender\r\nG1,One,\r\nG2,Two,\r\nJ1,Json,\r\nJ2,Null,' },
    })
    t.equal(again.status, 200, again.text)
    t.match(again.json, { Rows: 4, Added: 0, Changed: 1, Unchanged: 3, Rejected: 0 })
    t.match((await service.call('POST', '/people/update/importterm', { body: { ImportId: second } })).json, { Terminated: 0 }, 'no one lost to a blank Gender')
    t.same(await genders(), { G1: 'U', G2: 'U', J1: 'U', J2: 'U' })
  }),
)

// Two imports open at once (a retried sync, or a customer's and a parent-wide one): each
// importterm terminates only the people neither it nor a newer import delivered.
t.test('overlapping imports do not terminate the people the other one delivered', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const send = async (importId: number, people: object[]) => {
      const batch = await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, People: people } })
      t.equal(batch.status, 200, batch.text)
      return batch.json
    }
    const start = async () => (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId as number
    const finish = async (importId: number) => (await service.call('POST', '/people/update/importterm', { body: { ImportId: importId } })).json
    const first = await start()
    await send(first, [{ Source_Id: 'b1', LastName: 'Builder' }, { Source_Id: 'p2', LastName: 'Two' }, { Source_Id: 'x3', LastName: 'Three' }])
    t.match(await finish(first), { Added: 3, Terminated: 0 })

    const older = await start()
    const newer = await start()
    t.match(await send(newer, [{ Source_Id: 'b1', LastName: 'Builder' }, { Source_Id: 'p2', LastName: 'Two-B' }]), { Unchanged: 1, Changed: 1 })
    // The older import delivers them after the newer one did (p2 changed again: the upsert path).
    t.match(await send(older, [{ Source_Id: 'b1', LastName: 'Builder' }, { Source_Id: 'p2', LastName: 'Two-A' }, { Source_Id: 'x3', LastName: 'Three' }]), { Unchanged: 2, Changed: 1 })
    t.match(await finish(older), { Terminated: 0 }, 'the older import delivered all three')
    t.match(await finish(newer), { Terminated: 1 }, 'the newer import terminates only x3, which it did not deliver')
    const termDates = async () => Object.fromEntries((await service.call('POST', '/people/read/list', { body: {} })).json.People
      .map((person: { Source_Id: string; TermDate: string }) => [person.Source_Id, person.TermDate]))
    t.match(await termDates(), { b1: '', p2: '', x3: /^\d{4}-\d\d-\d\d$/ })

    // A terminated person delivered again keeps the TermDate unless the row clears it (docs/people.md).
    const again = await start()
    await send(again, [{ Source_Id: 'b1', LastName: 'Builder' }, { Source_Id: 'p2', LastName: 'Two-A' }, { Source_Id: 'x3', LastName: 'Three' }])
    t.match(await finish(again), { Unchanged: 3, Terminated: 0 })
    t.match(await termDates(), { x3: /^\d{4}-\d\d-\d\d$/ })
    const rehired = await start()
    await send(rehired, [{ Source_Id: 'b1', LastName: 'Builder' }, { Source_Id: 'p2', LastName: 'Two-A' }, { Source_Id: 'x3', LastName: 'Three', TermDate: '' }])
    t.match(await finish(rehired), { Changed: 1, Terminated: 0 })
    t.same(await termDates(), { b1: '', p2: '', x3: '' })
  }),
)

// Batches of imports open at once that bring the same new people, in opposite orders (a
// retried sync beside the first): on MariaDB their inserts met on the unique index in
// opposite orders, and the deadlock's victim was answered 503 as if the database were down.
t.test('concurrent batches of the same new people: no 5xx, every person written once', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const start = async () => (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId as number
    for (let round = 0; round < 3; round++) {
      const people = Array.from({ length: 3000 }, (_, index) => ({ Source_Id: `r${round}-${index}`, LastName: `Racer${index}` }))
      const imports = [await start(), await start(), await start(), await start()]
      const answers = await Promise.all(imports.map((importId, at) =>
        service.call('POST', '/people/update/importmass', { body: { ImportId: importId, People: at % 2 === 0 ? people : [...people].reverse() } })))
      // A batch that met another's new rows runs again and finds them: every batch answers 200,
      // as on SQLite, and the people are added once between them.
      for (const answer of answers) t.equal(answer.status, 200, `round ${round}: ${answer.text.slice(0, 120)}`)
      t.equal(answers.reduce((sum, answer) => sum + (answer.json?.Added ?? 0), 0), 3000, `round ${round}: each person added once`)
      for (const answer of answers) t.equal(answer.json?.Added + answer.json?.Unchanged, 3000, `round ${round}: the rest found them unchanged`)
      const listed = await service.call('POST', '/people/read/filtered', { body: { filter: `Source_Id=r${round}-0`, size: 1 } })
      t.equal(listed.json.Total, 1, `round ${round}: each person once`)
    }
  }),
)

// importterm while another import's batch writes the same people: the terminating update
// and the batch's upserts took people's locks in opposite orders, and MariaDB's deadlock
// victim (the importterm, again on every rerun) was answered 503. Now importterm first waits
// for the batches in flight of the parent's open imports (each holds its import's row).
t.test('importterm beside a batch of another import: it waits for the batch, no 5xx', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const start = async () => (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId as number
    const send = (importId: number, people: object[]) => service.call('POST', '/people/update/importmass', { body: { ImportId: importId, People: people } })
    for (let round = 0; round < 2; round++) {
      const people = Array.from({ length: 2000 }, (_, index) => ({ Source_Id: `t${round}-${index}`, LastName: 'Termer' }))
      const first = await start()
      t.equal((await send(first, people)).status, 200)
      const [beside, small] = [await start(), await start()]
      t.equal((await send(small, people.slice(0, 10))).status, 200)
      const answers = await Promise.all([
        service.call('POST', '/people/update/importterm', { body: { ImportId: first } }),
        service.call('POST', '/people/update/importterm', { body: { ImportId: small } }),
        send(beside, people.map((person) => ({ ...person, Dept: `Round ${round}` })).reverse()),
      ])
      for (const answer of answers) t.equal(answer.status, 200, `round ${round}: ${answer.text.slice(0, 120)}`)
    }
    if (kind !== 'mysql') return // SQLite has one writer: a batch and an importterm never overlap there.
    // A batch in flight, held open here: it holds its import's row, as importBatch's first statement does.
    const held = await start()
    const ending = await start()
    t.equal((await send(ending, [{ Source_Id: 'h1', LastName: 'Held' }])).status, 200)
    let answered = false
    let term: Promise<{ status: number }> | undefined
    await service.kernel.database.db.transaction().execute(async (trx) => {
      await sql`update people_imports set batches = batches + 1 where id = ${held}`.execute(trx)
      term = service.call('POST', '/people/update/importterm', { body: { ImportId: ending } }).then((answer) => {
        answered = true
        return answer
      })
      await new Promise((resolve) => setTimeout(resolve, 700))
      t.notOk(answered, 'importterm waits while a batch of another open import of the parent is in flight')
    })
    t.equal((await term!).status, 200, 'and answers once that batch is committed')
  }),
)

t.test('CSV: an unclosed quote or no header line refuses the batch; rows are numbered by physical line', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const importId = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    const refusals: [string, RegExp][] = [
      ['Source_Id,LastName,FirstName\nqq1,"Bad,F\nqq2,Good,F\nqq3,Good,F\n', /^Error: A quoted field that starts on row 1 is never closed, .*nothing of this batch was written\.$/],
      ['Source_Id,LastName\r\nok1,Fine\r\n\r\nok2,"Two\r\nlines"\r\nqq4,"open\r\nqq5,x\r\n', /^Error: A quoted field that starts on row 5 is never closed/],
      ['', /^Error: Csv has no header line/],
      ['\r\n  \r\n', /^Error: Csv has no header line/],
    ]
    for (const [csv, message] of refusals) {
      const refused = await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, Csv: csv } })
      t.equal(refused.status, 400, JSON.stringify(csv))
      t.match(refused.text, message)
    }
    t.equal((await service.call('GET', '/People/Read/Missing')).json.Total, 0, 'nothing written')

    // Blank lines and line breaks inside quotes count: Row is the line after the header where the record starts.
    const csv = 'Source_Id,LastName\nr1,A\n\nr3\nr4,"Two\nlines"\nr6,B,extra\n'
    const batch = await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, Csv: csv } })
    t.equal(batch.status, 200, batch.text)
    t.match(batch.json, { Batch: 1, Rows: 4, Added: 2, Rejected: 2 }, 'the refused batches were not counted')
    t.same(batch.json.Rejections.map((rejection: { Row: number; Source_Id: string }) => [rejection.Row, rejection.Source_Id]), [[3, 'r3'], [6, 'r6']])
  }),
)
