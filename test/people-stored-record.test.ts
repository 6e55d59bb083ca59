/**
 * On SQLite each person's record is stored rendered (people.record_text, storedRecord.ts)
 * and a listing sends it as it is (issue 19, goal 3). These tests make sure the text
 * never drifts from the columns: after every kind of write (OneChange create and edit,
 * OnePhoto, OneRemove, OneRecall, OneTerminate, an import's added and changed people,
 * importterm's terminations) every text was rendered by the write itself, and every
 * listed record equals the record rendered from the person's columns (on MariaDB, where
 * no text is kept, too), and equals what the write answered; a person whose text is
 * NULL (a row written by an older version) is listed the same, and rendered again later.
 * A listing's body is, byte for byte, the compact JSON of its value.
 */
import t from 'tap'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { personRecord, recordColumns } from '../plugins/people/fields.ts'
import { storedRecords } from '../plugins/people/storedRecord.ts'
import type { PeopleDb } from '../plugins/people/scope.ts'
import type { PeopleTables } from '../plugins/people/tables.ts'
import type { Test } from 'tap'

const peopleDb = (service: Service) => service.kernel.database.db.withTables<PeopleTables>() as unknown as PeopleDb

/** Every person of the service (deleted ones too), as listed in JSON pages of 500 followed by their Next, by Id. */
async function listed(service: Service): Promise<Map<number, Record<string, unknown>>> {
  const people = new Map<number, Record<string, unknown>>()
  let after: string | undefined
  do {
    const answer = await service.call('POST', '/people/read/list', { body: { IncludeDeleted: 1, size: 500, ...(after ? { after } : {}) } })
    if (answer.status !== 200) throw new Error(answer.text)
    // The body is the compact JSON of its own value, byte for byte (the records are joined as text or stringified as one page).
    if (answer.text !== JSON.stringify(answer.json)) throw new Error(`A listing body is not its value's JSON: ${answer.text.slice(0, 200)}`)
    for (const person of Array.isArray(answer.json.People) ? answer.json.People as Record<string, unknown>[] : []) people.set(Number(person.Id), person)
    after = answer.json.Next
  } while (after)
  return people
}

/**
 * Checks that every person's record was rendered by the write itself (none left NULL for
 * a listing to render), and that every listed record is the one its columns give, field
 * for field and in the interface's order.
 */
async function listedAsStored(t: Test, service: Service, after: string): Promise<Map<number, Record<string, unknown>>> {
  const rows = await peopleDb(service).selectFrom('people').select([...recordColumns, 'record_text']).orderBy('id').execute()
  if (storedRecords(service.kernel.database.dialect).kept) {
    t.same(rows.filter((row) => row.record_text === null).map((row) => row.id), [], `${after}: every stored record rendered by the write`)
  } else {
    t.same(rows.filter((row) => row.record_text !== null).map((row) => row.id), [], `${after}: no record text kept on ${service.kernel.database.dialect}`)
  }
  const people = await listed(service)
  t.equal(people.size, rows.length, `${after}: everyone is listed`)
  for (const row of rows) {
    const person = people.get(Number(row.id))
    t.same(person, personRecord(row), `${after}: person ${row.id} listed as its columns say`)
    t.same(Object.keys(person ?? {}), Object.keys(personRecord(row)), `${after}: person ${row.id}'s fields in order`)
  }
  return people
}

t.test('a listed record is the person as stored, after every kind of write', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const write = async (path: string, body: Record<string, unknown>) => {
      const answer = await service.call('POST', path, { body })
      t.equal(answer.status, 200, `${path}: ${answer.text.slice(0, 200)}`)
      return answer.json
    }
    const answered = async (what: string, record: Record<string, unknown>) => {
      const people = await listedAsStored(t, service, what)
      t.same(people.get(Number(record.Id)), record, `${what}: listed as the write answered`)
    }

    const created = await write('/People/Update/OneChange', { FirstName: 'Ann', LastName: 'Quote "and" \\ back', Email: 'ann@example.com', Birthday: '0000-02-29', DateLast: '2026-01-02T03:04:05Z' })
    await answered('created', created)
    await answered('edited', await write('/People/Update/OneChange', { Id: created.Id, Title: 'Chief ünïcødé officer ☃', DateLast: '' }))
    await answered('photo set', await write('/People/Update/OnePhoto', { Id: created.Id, Photo: 'https://photos.example/ann.jpg' }))
    await answered('photo cleared', await write('/People/Update/OnePhoto', { Id: created.Id, Photo: null }))
    await answered('terminated', await write('/People/Update/OneTerminate', { Id: created.Id, TermDate: '2026-03-31' }))
    await answered('removed', await write('/People/Update/OneRemove', { Id: created.Id }))
    await answered('recalled', await write('/People/Update/OneRecall', { Id: created.Id }))

    // An import adds two people and changes one of them in a second import; the second
    // import's end terminates the one it did not deliver.
    const first = (await write('/people/update/importinit', {})).ImportId
    await write('/people/update/importmass', { ImportId: first, People: [
      { Source_Id: 'S1', FirstName: 'Bo', LastName: 'Import', Dept: 'IT', HireDate: '2020-01-15' },
      { Source_Id: 'S2', FirstName: 'Cy', LastName: 'Import', Gender: 'F' },
    ] })
    await listedAsStored(t, service, 'import added')
    await write('/people/update/importterm', { ImportId: first })
    await listedAsStored(t, service, 'first import finished (the hand-made person terminated)')
    const second = (await write('/people/update/importinit', {})).ImportId
    const batch = await write('/people/update/importmass', { ImportId: second, People: [{ Source_Id: 'S1', LastName: 'Import', Dept: 'Sales', NickName: 'B' }] })
    t.equal(batch.Changed, 1, 'the second import changes Bo')
    await listedAsStored(t, service, 'import changed')
    const finished = await write('/people/update/importterm', { ImportId: second })
    t.equal(finished.Terminated, 1, 'the second import terminates Cy')
    const people = await listedAsStored(t, service, 'second import finished')
    t.ok([...people.values()].some((person) => person.FirstName === 'Cy' && person.TermDate !== ''), "Cy's listed record shows the termination")
  }),
)

t.test('a person whose stored record is missing is listed from its columns, and rendered again', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const records = storedRecords(service.kernel.database.dialect)
    if (!records.kept) {
      t.comment(`no record texts are kept on ${kind}: a page always renders its people's columns`)
      return
    }
    const importId = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    const roster = Array.from({ length: 1200 }, (_, index) => ({ Source_Id: `R${index}`, FirstName: `F${index}`, LastName: `L${index % 97}` }))
    t.equal((await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, People: roster } })).json.Added, 1200)
    const db = peopleDb(service)
    const rendered = await listed(service)

    // As a row written before migration 0003 rendered it, or by a write that forgot to.
    await db.updateTable('people').set({ record_text: null }).where('id', '<=', 700).execute()
    t.same(await listed(service), rendered, 'listed the same while some stored records are missing')
    const page = await service.call('GET', '/People/Read/Missing?size=100')
    t.equal(page.status, 200)
    t.equal(page.json.People.length, 100, 'a page of 100 from a mixed table')

    t.equal(await records.renderStale(db, null), 700, 'the missing records are rendered again (as migration 0003 does)')
    const left = await db.selectFrom('people').select((eb) => eb.fn.countAll().as('count')).where('record_text', 'is', null).executeTakeFirstOrThrow()
    t.equal(Number(left.count), 0, 'none left missing')
    await listedAsStored(t, service, 'after rendering again')
  }),
)
