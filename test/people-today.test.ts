/**
 * GET /People/Read/Today (D14) with a fake clock: birthdays (month and day only, the
 * year is invalid on purpose) and work anniversaries (Years >= 1) today in the tenant's
 * time zone; Skip, Deleted, TermDate and dispgroup; 29 February on 28 February in other
 * years; across a month boundary; json, xml and csv; a player's Last_Seen.
 */
import t from 'tap'
import { forEachDatabase, startService, type CallOptions } from './helpers/service.ts'
import { groupNamed, insertKey } from './helpers/keys.ts'
import { addTestPlayer, setEntitlement } from './helpers/tenants.ts'
import { httpDate } from '../kernel/auth/apiDate.ts'

t.test('Today', (t) =>
  forEachDatabase(t, async (t, kind) => {
    let now = Date.UTC(2027, 1, 28, 12, 0, 0) // Sunday 28 February 2027, not a leap year
    const service = await startService(t, { kind, clock: () => now })
    const call = (method: string, path: string, options: CallOptions = {}) => service.call(method, path, { ...options, date: new Date(now).toUTCString() })
    const person = async (fields: Record<string, unknown>) => {
      const added = await call('POST', '/People/Update/OneChange', { body: fields })
      t.equal(added.status, 200, String(fields.LastName))
      return added.json.Id as number
    }
    const ada = await person({ FirstName: 'Ada', LastName: 'Birthday', Birthday: '1900-02-28' })
    const leap = await person({ FirstName: 'Lee', LastName: 'Leapling', Birthday: '0000-02-29' })
    const hired = await person({ FirstName: 'Mo', LastName: 'March', HireDate: '2020-03-01' })
    await person({ FirstName: 'Sam', LastName: 'Skipper', Birthday: '1900-02-28', HireDate: '2019-02-28', Skip: 'Birthday' })
    const gone = await person({ FirstName: 'Del', LastName: 'Deleted', Birthday: '1900-02-28' })
    t.equal((await call('POST', '/People/Update/OneRemove', { body: { Id: gone } })).status, 200)
    await person({ FirstName: 'Ted', LastName: 'Terminated', Birthday: '1900-02-28', TermDate: '2027-01-31' })
    const leaving = await person({ FirstName: 'Liv', LastName: 'Leaving', Birthday: '1900-02-28', TermDate: '2027-12-31' })
    await person({ FirstName: 'New', LastName: 'Starter', HireDate: '2027-02-28' })
    const lobby = await person({ FirstName: 'Lo', LastName: 'Lobbyist', Birthday: '1980-02-28', HireDate: '2017-02-28', DispGroup: 'Lobby' })
    const other = await insertKey(service, { parent: 2, custno: 0 })
    t.equal((await call('POST', '/People/Update/OneChange', { key: other, body: { LastName: 'Elsewhere', Birthday: '1900-02-28' } })).status, 200)

    const today = async (query = '') => {
      const answer = await call('GET', `/People/Read/Today${query}`)
      t.equal(answer.status, 200)
      return answer.json as { Id: number; LastName: string; Occasion: string; Years: number | null }[]
    }
    const summary = (entries: Awaited<ReturnType<typeof today>>) => entries.map((entry) => `${entry.LastName}:${entry.Occasion}${entry.Years === null ? '' : `:${entry.Years}`}`)

    const feb28 = await today()
    t.same(summary(feb28), ['Birthday:Birthday', 'Leapling:Birthday', 'Leaving:Birthday', 'Lobbyist:Birthday', 'Lobbyist:Anniversary:10', 'Skipper:Anniversary:8'],
      '28 Feb 2027: 29 Feb birthdays too; not deleted, terminated, skipped, or hired this year; a future TermDate still shows')
    const entry = feb28.find((item) => item.Id === ada)!
    t.same(Object.keys(entry).slice(-3), ['DateEdit', 'Occasion', 'Years'], 'the person record, then Occasion and Years')
    t.equal((entry as unknown as { Birthday: string }).Birthday, '1900-02-28')
    t.same(summary(await today('?dispgroup=Lobby')), ['Lobbyist:Birthday', 'Lobbyist:Anniversary:10'], 'one display group')
    // Surrounding white space is dropped (as in listing filters): SQLite and MariaDB, whose comparison ignores trailing spaces, answer alike.
    t.same(summary(await today('?dispgroup=Lobby%20')), ['Lobbyist:Birthday', 'Lobbyist:Anniversary:10'], 'trailing space dropped')
    t.same(summary(await today('?dispgroup=%09Lobby')), ['Lobbyist:Birthday', 'Lobbyist:Anniversary:10'], 'leading tab dropped')
    t.same(await today('?dispgroup=Nobody'), [], 'nobody: an empty list')
    t.equal((await call('GET', '/People/Read/Today?dispgroup=')).status, 400, 'an empty dispgroup is a mistake')
    const blank = await call('GET', '/People/Read/Today?dispgroup=%20%20')
    t.equal(blank.status, 400, 'so is one of white space alone')
    t.equal(blank.text, 'Error: dispgroup must not be empty.')
    t.equal((await call('GET', '/People/Read/Today?group=Lobby')).status, 400, 'unknown parameter')
    t.ok(feb28.every((item) => item.Id !== leaving || item.Occasion === 'Birthday'))

    // Across the month boundary: 1 March 2027.
    now = Date.UTC(2027, 2, 1, 12, 0, 0)
    t.same(summary(await today()), ['March:Anniversary:7'], '1 March: the 29 February birthday was yesterday')

    // 2028 is a leap year: 29 February birthdays are on the 29th, not the 28th.
    now = Date.UTC(2028, 1, 28, 12, 0, 0)
    t.notOk(summary(await today()).includes('Leapling:Birthday'), '28 Feb 2028: not yet')
    now = Date.UTC(2028, 1, 29, 12, 0, 0)
    const feb29 = await today()
    t.same(summary(feb29), ['Leapling:Birthday'], '29 Feb 2028')
    t.equal(feb29[0].Id, leap)

    // The tenant's time zone: 23:30 UTC on 28 February is already 1 March in Oslo.
    now = Date.UTC(2027, 1, 28, 23, 30, 0)
    t.ok(summary(await today()).includes('Birthday:Birthday'), 'UTC by default (config people.timeZone)')
    await setEntitlement(service, 1, 0, { TimeZone: 'Europe/Oslo' })
    t.same(summary(await today()), ['March:Anniversary:7'], "the tenant's zone")
    await setEntitlement(service, 1, 0, { TimeZone: 'America/New_York' })
    now = Date.UTC(2027, 2, 1, 3, 0, 0)
    t.ok(summary(await today()).includes('Birthday:Birthday'), '03:00 UTC on 1 March is still 28 February in New York')
    t.equal(hired > 0, true)

    // Formats.
    now = Date.UTC(2027, 2, 1, 12, 0, 0)
    await setEntitlement(service, 1, 0, { TimeZone: null })
    const xml = await call('GET', '/People/Read/Today?format=xml')
    t.equal(xml.status, 200)
    t.match(xml.text, /<Today>\s*<Person>\s*<Id>\d+<\/Id>[\s\S]*<Occasion>Anniversary<\/Occasion>\s*<Years>7<\/Years>\s*<\/Person>\s*<\/Today>/)
    const csv = await call('GET', '/People/Read/Today?format=csv')
    t.equal(csv.status, 200)
    const [header, row] = csv.text.split('\r\n')
    t.match(header, /^Id,Emp_Id,Created,.*,DateEdit,Occasion,Years$/)
    t.match(row, /,Anniversary,7$/)
  }),
)

t.test("a player's key reads people only, and its calls to Today keep its Last_Seen", (t) =>
  forEachDatabase(t, async (t, kind) => {
    let now = Date.UTC(2027, 5, 1, 9, 0, 0)
    const service = await startService(t, { kind, clock: () => now })
    const player = await addTestPlayer(service, 1, 0, 'Lobby', { dispGroup: 'Lobby' })
    const call = (path: string, method = 'GET') => service.call(method, path, { key: player, date: new Date(now).toUTCString() })
    const lastSeen = async () => {
      const players = await service.call('POST', '/account/read/player', { date: new Date(now).toUTCString() })
      return players.json.find((item: { Id: number }) => item.Id === player.playerId).Last_Seen
    }
    t.equal(await lastSeen(), null, 'never seen')
    t.equal((await call('/People/Read/Today?dispgroup=Lobby')).status, 200)
    const seenAt = now
    t.equal(await lastSeen(), httpDate(seenAt))
    now += 30_000
    t.equal((await call('/People/Read/Today')).status, 200)
    t.equal(await lastSeen(), httpDate(seenAt), 'written at most once a minute')
    now += 31_000
    t.equal((await call('/People/Read/Today')).status, 200)
    t.equal(await lastSeen(), httpDate(now), 'and then again')

    t.equal((await call('/People/Read/Missing')).status, 200, 'other people reads work')
    for (const [path, method] of [['/account/read/license', 'GET'], ['/Api/Read/Acl', 'GET'], ['/account/read/player', 'POST'], ['/Api/Read/Keys', 'GET']]) {
      const refused = await call(path, method)
      t.equal(refused.status, 403, `${method} ${path}`)
    }
    const groups = await service.kernel.services.keys.groupsOf(player.id)
    t.same(groups.map((group) => [group.Display_Name, group.Paths]), [['Display players', ['/People/Read/*']]])
    t.equal((await groupNamed(service, 'Display players')) > 0, true)
  }),
)

t.test("OneTerminate and importterm date a termination with the tenant's today, not UTC's", (t) =>
  forEachDatabase(t, async (t, kind) => {
    // 23:30 UTC on 31 December 2026 is already 1 January 2027 in Oslo.
    const now = Date.UTC(2026, 11, 31, 23, 30, 0)
    const service = await startService(t, { kind, clock: () => now })
    // A write is accepted once per signature: each call signs with its own millisecond.
    let sent = 0
    const call = (path: string, body: unknown) => service.call('POST', path, { body, date: new Date(now + sent++).toISOString() })
    const made = await call('/People/Update/OneChange', { FirstName: 'Ole', LastName: 'Leaving' })
    t.equal(made.status, 200, made.text)
    const utc = await call('/People/Update/OneTerminate', { Id: made.json.Id })
    t.equal(utc.json.TermDate, '2026-12-31', 'UTC by default (config people.timeZone)')

    await setEntitlement(service, 1, 0, { TimeZone: 'Europe/Oslo' })
    const oslo = await call('/People/Update/OneTerminate', { Id: made.json.Id })
    t.equal(oslo.status, 200, oslo.text)
    t.equal(oslo.json.TermDate, '2027-01-01', "the tenant's date")
    t.equal((await call('/People/Update/OneTerminate', { Id: made.json.Id, TermDate: '2026-06-30' })).json.TermDate, '2026-06-30', 'a given TermDate is kept')

    const stays = await call('/People/Update/OneChange', { LastName: 'Staying', Source_Id: 's1' })
    const goes = await call('/People/Update/OneChange', { LastName: 'Going', Source_Id: 's2' })
    const started = await call('/people/update/importinit', {})
    const importId = started.json.ImportId
    t.equal((await call('/people/update/importmass', { ImportId: importId, People: [{ Source_Id: 's1', LastName: 'Staying' }] })).status, 200)
    t.equal((await call('/people/update/importterm', { ImportId: importId })).json.Terminated, 1)
    const listed = await call('/people/read/list', { filter: 'TermDate=' })
    t.same(listed.json.People.map((person: { Id: number }) => person.Id), [stays.json.Id], 'the one delivered stays')
    const gone = await call('/people/read/list', { filter: `LastName=Going` })
    t.equal(gone.json.People[0].Id, goes.json.Id)
    t.equal(gone.json.People[0].TermDate, '2027-01-01', "importterm: the tenant's date")
  }),
)
