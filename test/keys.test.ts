/**
 * The keys plugin (issue 3): the "Done when" walk-through, the listings, and every rule
 * of POST /Api/Create/Key as a table of cases, on SQLite and MariaDB.
 */
import t, { type Test } from 'tap'
import Papa from 'papaparse'
import { forEachDatabase, startService, type DatabaseKind, type Service } from './helpers/service.ts'
import type { KeyFields } from '../kernel/auth/keyIssuer.ts'
import { insertKey, keyTestGroups } from './helpers/keys.ts'
import type { SigningKey } from '../kernel/auth/signature.ts'
import { httpDate } from '../kernel/auth/apiDate.ts'

interface KeysFixture {
  service: Service
  groups: { keyAdmin: number; aclReader: number; people: number; reports: number; wildcard: number }
  create(body: unknown, key?: SigningKey): ReturnType<Service['call']>
  edit(body: unknown, key?: SigningKey): ReturnType<Service['call']>
  /** A key written straight to the database (another tenant's admin, a sub-admin). */
  insertKey(fields: Partial<KeyFields> & { display_name: string }, groupIds: number[]): Promise<SigningKey & { id: number }>
}

/** A service whose root admin also holds two plain groups and one that allows key creation by wildcard. */
async function keysFixture(t: Test, kind: DatabaseKind): Promise<KeysFixture> {
  const service = await startService(t, { kind })
  // Covers /Api/Create/Key through a wildcard: it allows key creation, so it is never assignable.
  const groups = await keyTestGroups(service, { wildcard: { name: 'All of Api', paths: [{ path: '/Api/*', displayName: 'Everything under /Api' }] } })
  return {
    service,
    groups,
    create: (body, key = service.admin) => service.call('POST', '/Api/Create/Key', { body, today: true, key }),
    edit: (body, key = service.admin) => service.call('POST', '/Api/Edit/Key', { body, today: true, key }),
    insertKey: (fields, groupIds) => insertKey(service, fields, groupIds, Date.now()),
  }
}

const paths = (acl: { Path: string }[]) => acl.map((entry) => entry.Path).sort()
/** The api plugin's Is_Public entries (D15): in every key's ACL. */
const publicPaths = ['/Api/Read/Changes', '/Api/Read/Changes/Rss', '/Api/Read/OpenApi', '/Api/Read/Reference', '/Api/Read/Reference/*']

t.test('done when: create with two groups, read the ACL, edit down to one, disable', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { service, groups, create, edit } = await keysFixture(t, kind)
    const created = await create({ Display_Name: 'Walk-through', GroupId: `${groups.aclReader},${groups.people}`, Require_Https: 0 })
    t.equal(created.status, 200, created.text)
    t.same(Object.keys(created.json), ['Id', 'Api_Key', 'Api_Secret', 'Name', 'MaxHits'])
    t.match(created.json, { Id: Number, Api_Key: /^kg_[\w-]{22,}$/, Api_Secret: /^[\w-]{43,}$/, Name: 'Walk-through', MaxHits: '' })
    const key = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }

    const before = await service.call('GET', '/Api/Read/Acl', { key })
    t.equal(before.status, 200, before.text)
    t.same(paths(before.json), ['/Api/Read/Acl', ...publicPaths, '/People/Read/*'])
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).headers.get('x-cache'), 'HIT', 'the ACL answer is cached')
    t.equal((await service.call('POST', '/Api/Create/Key', { key, today: true, body: { Display_Name: 'x', GroupId: groups.aclReader } })).status, 403, 'the new key cannot create keys')

    const narrowed = await edit({ KeyId: created.json.Id, GroupId: [groups.aclReader] })
    t.equal(narrowed.status, 200, narrowed.text)
    t.same(narrowed.json, created.json, 'edit answers the same key and secret')
    const after = await service.call('GET', '/Api/Read/Acl', { key })
    t.equal(after.status, 200)
    t.not(after.headers.get('x-cache'), 'HIT', 'the cached ACL was dropped by the edit')
    t.same(paths(after.json), ['/Api/Read/Acl', ...publicPaths], 'the ACL changed on the very next call')

    const disabled = await edit({ ApiKey: key.apiKey, EndDate: httpDate(Date.now()) })
    t.equal(disabled.status, 200, disabled.text)
    const refused = await service.call('GET', '/Api/Read/Acl', { key })
    t.equal(refused.status, 401, 'a disabled key authenticates nowhere')
    t.equal(refused.text, 'Error: Unknown or inactive API key.')
    const listed = await service.call('GET', '/Api/Read/Keys')
    t.match(listed.json.find((item: { Id: number }) => item.Id === created.json.Id), { Active: 0, EndDate: String })

    const enabled = await edit({ KeyId: created.json.Id, EndDate: null })
    t.equal(enabled.status, 200, enabled.text)
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200, 'clearing EndDate enables the key again')
  }),
)

t.test('new keys require HTTPS by default; secrets are sealed at rest', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { service, groups, create } = await keysFixture(t, kind)
    const created = await create({ Display_Name: 'Default HTTPS', GroupId: groups.aclReader })
    t.equal(created.status, 200, created.text)
    const key = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
    const overHttp = await service.call('GET', '/Api/Read/Acl', { key })
    t.equal(overHttp.status, 403)
    t.equal(overHttp.text, 'Error: HTTPS is required for this key or path.')

    const row = await service.kernel.database.db.selectFrom('api_keys').selectAll().where('id', '=', created.json.Id).executeTakeFirstOrThrow()
    t.equal(row.api_key, created.json.Api_Key)
    t.match(row.secret_enc, /^v1:/)
    t.notOk(row.secret_enc.includes(created.json.Api_Secret), 'the stored secret is not the plaintext')
    t.notOk(Buffer.from(row.secret_enc.slice(3), 'base64').toString('latin1').includes(created.json.Api_Secret), 'nor its base64 body')
    t.equal(Number(row.require_https), 1)
    t.equal(Number(row.created_by), service.admin.id)

    // A fully logged create (x-LogLevel 2 keeps the answer) must not put the secret in the call log.
    const logged = await service.call('POST', '/Api/Create/Key', { today: true, headers: { 'x-LogLevel': '2' }, body: { Display_Name: 'Logged', GroupId: groups.aclReader } })
    t.equal(logged.status, 200, logged.text)
    const record = await service.kernel.services.callLog.find(Number(logged.headers.get('x-requestid')), service.admin.id)
    t.ok(record, 'the create was logged')
    t.notOk(JSON.stringify(record).includes(logged.json.Api_Secret), 'the call log does not hold the new secret')
  }),
)

t.test('GET/POST /Api/Read/Groups and GET /Api/Read/Keys', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { service, groups, create, insertKey } = await keysFixture(t, kind)
    for (const [method, body] of [['GET', undefined], ['POST', {}], ['post', undefined]] as const) {
      const listed = await service.call(method.toUpperCase(), method === 'post' ? '/api/read/groups' : '/Api/Read/Groups', { body })
      t.equal(listed.status, 200, `${method} ${listed.text}`)
      const listedIds = listed.json.map((group: { Id: number }) => group.Id)
      for (const held of [groups.aclReader, groups.people, groups.reports]) t.ok(listedIds.includes(held), `${method}: group ${held} the caller holds is listed`)
      for (const creating of [groups.keyAdmin, groups.wildcard]) t.notOk(listedIds.includes(creating), `${method}: group ${creating} allows key creation and is never listed`)
      t.notOk(listed.json.some((group: { Paths: string[] }) => group.Paths.some((path) => path === '/*' || /^\/api\/(\*|create\/\*|create\/key)$/i.test(path))), 'no listed group covers /Api/Create/Key')
      t.same(listed.json.find((group: { Id: number }) => group.Id === groups.people), { Id: groups.people, Display_Name: 'People readers', Paths: ['/People/Read/*'] })
      // D9: "lists exactly those": every group the caller holds (D14's own-groups read) but those allowing key creation.
      const held = (await service.call('POST', '/Account/Read/Group', { body: {} })).json as { Id: number; Paths: string[] }[]
      const expected = held.filter((group) => !group.Paths.some((path) => path === '/*' || /^\/api\/(\*|create\/\*|create\/key)$/i.test(path)))
      t.same(listedIds.sort((a: number, b: number) => a - b), expected.map((group) => group.Id).sort((a, b) => a - b), `${method}: exactly the held groups that do not allow key creation`)
    }
    t.equal((await service.call('POST', '/Api/Read/Groups', { body: { Extra: 1 } })).status, 400)

    t.same((await service.call('GET', '/Api/Read/Keys')).json, [], 'no keys created yet')
    const subAdmin = await insertKey({ display_name: 'Sub admin' }, [groups.keyAdmin, groups.people])
    const subGroups = await service.call('GET', '/Api/Read/Groups', { key: subAdmin })
    t.same(subGroups.json.map((group: { Id: number }) => group.Id), [groups.people], 'a key lists only the groups it holds itself')

    const created = await create({
      Display_Name: 'Listed ключ 🔑', Email: 'ops@example.com', Phone: '+1 555 0100', GroupId: [groups.people, groups.aclReader],
      StartDate: '2020-01-01T00:00:00Z', EndDate: 'Fri, 01 Jan 2100 00:00:00 GMT', DayPass: 1, Require_Https: 0, AllowHours: 0.5,
      ResponseFormat: 'xml', LogLevel: 2, LogRaw: 3, MaxHits: ' 1000/1hour , 10/1sec ', Require_Hash: 5,
    })
    t.equal(created.status, 200, created.text)
    t.equal(created.json.MaxHits, '10/1Sec,1000/1Hour', 'MaxHits comes back in its canonical spelling')
    const keys = await service.call('GET', '/api/read/keys')
    t.equal(keys.status, 200)
    t.same(keys.json, [{
      Id: created.json.Id, Api_Key: created.json.Api_Key, Display_Name: 'Listed ключ 🔑', Email: 'ops@example.com', Phone: '+1 555 0100',
      Parent: 1, Custno: 0, StartDate: 'Wed, 01 Jan 2020 00:00:00 GMT', EndDate: 'Fri, 01 Jan 2100 00:00:00 GMT', Active: 1,
      DayPass: 1, Require_Https: 0, AllowHours: 0.5, ResponseFormat: 'xml', LogLevel: 2, LogRaw: 3, MaxHits: '10/1Sec,1000/1Hour', Require_Hash: 5,
      Groups: [{ Id: groups.aclReader, Display_Name: 'Access list reader' }, { Id: groups.people, Display_Name: 'People readers' }].sort((a, b) => a.Id - b.Id),
      Created: keys.json[0].Created, Credits: null, Refill: null,
    }])
    t.notOk(keys.text.includes(created.json.Api_Secret), 'the listing never shows a secret')
    t.match(keys.json[0].Created, /^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/)
    t.same((await service.call('GET', '/Api/Read/Keys', { key: subAdmin })).json, [], 'only the keys the caller created')

    const xml = await service.call('GET', '/Api/Read/Keys?format=xml')
    t.match(xml.text, /<Keys>\s*<Key>\s*<Id>\d+<\/Id>/)
    const groupsXml = await service.call('GET', '/Api/Read/Groups?format=xml')
    t.match(groupsXml.text, /<Groups>\s*<Group>/)
    const createdXml = await service.call('POST', '/Api/Create/Key?format=xml', { today: true, body: { Display_Name: 'As XML', GroupId: groups.reports } })
    t.match(createdXml.text, /<Key>\s*<Id>\d+<\/Id>\s*<Api_Key>kg_/)
    const csv = await service.call('GET', '/Api/Read/Keys?format=csv')
    t.match(csv.text.split('\r\n')[0], /^Id,Api_Key,Display_Name,/)
    // A key's groups in XML are <Group> items, as in the other group lists; in CSV a
    // group's paths are one comma-separated cell, as /account/read/group writes them.
    t.match(xml.text, /<Groups>\s*<Group>\s*<Id>\d+<\/Id>\s*<Display_Name>/)
    t.notMatch(xml.text, /<Groups>\s*<Id>/)
    const groupsCsv = Papa.parse<Record<string, string>>((await service.call('GET', '/Api/Read/Groups?format=csv')).text, { header: true, skipEmptyLines: true })
    const groupsJson = (await service.call('GET', '/Api/Read/Groups')).json as { Paths: string[] }[]
    t.same(groupsCsv.data.map((row) => row.Paths), groupsJson.map((group) => group.Paths.join(',')))
    // The secret of a CSV answer is the secret: it signs as it stands.
    const createdCsv = await service.call('POST', '/Api/Create/Key?format=csv', { today: true, body: { Display_Name: 'As CSV', GroupId: groups.aclReader, Require_Https: 0 } })
    const [row] = Papa.parse<Record<string, string>>(createdCsv.text, { header: true, skipEmptyLines: true }).data
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: { apiKey: row.Api_Key, secret: row.Api_Secret } })).status, 200)
  }),
)

t.test('POST /Api/Create/Key: fields, defaults and invalid parameters', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { service, groups, create } = await keysFixture(t, kind)
    const base = { GroupId: groups.aclReader }
    let serial = 0
    const name = () => `Case ${++serial}`

    const minimal = await create({ Display_Name: name(), ...base })
    t.equal(minimal.status, 200, minimal.text)
    const row = await service.kernel.database.db.selectFrom('api_keys').selectAll().where('id', '=', minimal.json.Id).executeTakeFirstOrThrow()
    t.match(
      { ...row, parent: Number(row.parent), custno: Number(row.custno), day_pass: Number(row.day_pass), require_https: Number(row.require_https), log_level: Number(row.log_level), log_raw: Number(row.log_raw) },
      { parent: 1, custno: 0, email: null, phone: null, end_date: null, day_pass: 0, require_https: 1, allow_hours: null, response_format: 'json', log_level: 0, log_raw: 0, max_hits: null, require_hash: null },
      'interface 2.1 defaults',
    )
    t.ok(Math.abs(Number(row.start_date) - Date.now()) < 60_000, 'StartDate defaults to the creation time')

    const accepted: [string, Record<string, unknown>][] = [
      ['GroupId as a number', { GroupId: groups.aclReader }],
      ['GroupId as a comma-separated string', { GroupId: ` ${groups.aclReader} , ${groups.people}` }],
      ['GroupId as an array', { GroupId: [groups.people, groups.reports] }],
      ['GroupId repeating an id', { GroupId: [groups.people, groups.people] }],
      ['StartDate as RFC 3339', { StartDate: '2026-11-22T08:49:37Z' }],
      ['StartDate as RFC 3339 with an offset', { StartDate: '2026-11-22T08:49:37+02:00' }],
      ['EndDate as HTTP-date', { EndDate: 'Sun, 22 Nov 2099 08:49:37 GMT' }],
      ['AllowHours fractional', { AllowHours: 0.25 }],
      ['AllowHours 0', { AllowHours: 0 }],
      ['AllowHours null', { AllowHours: null }],
      ['ResponseFormat csv', { ResponseFormat: 'csv' }],
      ['LogLevel 7', { LogLevel: 7 }],
      ['MaxHits empty', { MaxHits: '' }],
      ['MaxHits null', { MaxHits: null }],
      ['Require_Hash 0', { Require_Hash: 0 }],
      ['Require_Hash null', { Require_Hash: null }],
      ['Email and Phone null', { Email: null, Phone: null }],
      ['Defaults naming the caller\'s own tenant', { Defaults: { Parent: 1, Custno: 0 } }],
      ['Defaults with another customer of a parent-wide caller', { Defaults: { Custno: 42 } }],
      ['Display_Name in any script', { Display_Name: 'Schlüssel 鍵 مفتاح 🗝️' }],
    ]
    for (const [label, fields] of accepted) {
      const answer = await create({ Display_Name: name(), ...base, ...fields })
      t.equal(answer.status, 200, `${label}: ${answer.text}`)
    }

    const refused: [string, Record<string, unknown>, RegExp | string][] = [
      ['no Display_Name', { Display_Name: undefined }, 'Error: Display_Name is required.'],
      ['no GroupId', { GroupId: undefined }, 'Error: GroupId is required.'],
      ['empty Display_Name', { Display_Name: '' }, /^Error: Display_Name must not be empty/],
      ['Display_Name too long', { Display_Name: 'x'.repeat(256) }, /^Error: Display_Name must be at most 255 characters/],
      ['Display_Name with trailing space', { Display_Name: 'Padded ' }, 'Error: Display_Name must not start or end with white space.'],
      ['Display_Name with a control character', { Display_Name: 'Tab\there' }, 'Error: Display_Name must not contain control characters.'],
      ['Display_Name with a C1 control character', { Display_Name: 'Next\u0085line' }, 'Error: Display_Name must not contain control characters.'],
      ['Display_Name of zero-width spaces only', { Display_Name: '\u200b\u200b' }, 'Error: Display_Name must contain a visible character.'],
      ['Display_Name with a lone surrogate', { Display_Name: 'Half \ud83d' }, 'Error: Display_Name is not valid Unicode text.'],
      ['Display_Name a number', { Display_Name: 7 }, /^Error: Display_Name must be a string/],
      ['Email a number', { Email: 5 }, /^Error: Email must be a string or null/],
      ['Phone too long', { Phone: '1'.repeat(101) }, /^Error: Phone must be at most 100 characters/],
      ['StartDate not a date', { StartDate: 'tomorrow' }, /^Error: StartDate must be an HTTP-date/],
      ['StartDate impossible', { StartDate: '2026-02-31T00:00:00Z' }, /^Error: StartDate must be an HTTP-date/],
      ['EndDate not a date', { EndDate: '22/11/2026' }, /^Error: EndDate must be an HTTP-date/],
      // Its zone would move it into year 10000, which no HTTP-date answer can show.
      ['EndDate past year 9999 in UTC', { EndDate: '9999-12-31T23:59:59-23:59' }, /^Error: EndDate must be an HTTP-date/],
      ['EndDate equal to StartDate', { StartDate: '2030-01-01T00:00:00Z', EndDate: 'Tue, 01 Jan 2030 00:00:00 GMT' }, 'Error: EndDate must be after StartDate.'],
      ['EndDate before StartDate', { StartDate: '2030-01-02T00:00:00Z', EndDate: '2030-01-01T00:00:00Z' }, 'Error: EndDate must be after StartDate.'],
      ['EndDate in the past with the default StartDate', { EndDate: '2000-01-01T00:00:00Z' }, 'Error: EndDate must be after StartDate (which defaults to now).'],
      ['DayPass 2', { DayPass: 2 }, 'Error: DayPass must be one of 0, 1.'],
      ['DayPass as a string', { DayPass: '1' }, /^Error: DayPass must be an integer/],
      ['Require_Https true', { Require_Https: true }, /^Error: Require_Https must be an integer/],
      ['AllowHours negative', { AllowHours: -1 }, /^Error: AllowHours must be >= 0/],
      ['AllowHours a string', { AllowHours: '5' }, /^Error: AllowHours must be a number or null/],
      ['ResponseFormat unknown', { ResponseFormat: 'yaml' }, 'Error: ResponseFormat must be one of json, xml, csv.'],
      ['LogLevel fractional', { LogLevel: 1.5 }, /^Error: LogLevel must be an integer/],
      ['LogRaw negative', { LogRaw: -2 }, /^Error: LogRaw must be >= 0/],
      ['MaxHits malformed', { MaxHits: '10 per second' }, /^Error: MaxHits item '10 per second' is not of the form/],
      ['MaxHits unknown unit', { MaxHits: '10/1Week' }, /^Error: MaxHits item '10\/1Week'/],
      ['MaxHits a window twice', { MaxHits: '10/1Sec,20/1sec' }, 'Error: MaxHits names the window 1Sec twice'],
      ['MaxHits zero', { MaxHits: '0/1Sec' }, /^Error: MaxHits item '0\/1Sec' needs a count/],
      ['Require_Hash 6', { Require_Hash: 6 }, /^Error: Require_Hash must be <= 5/],
      ['GroupId zero', { GroupId: 0 }, /^Error: GroupId must be >= 1/],
      ['GroupId a word', { GroupId: 'admins' }, 'Error: GroupId must be a group id, a comma-separated list of group ids, or an array of group ids.'],
      ['GroupId with an empty item', { GroupId: `${groups.aclReader},` }, 'Error: GroupId must be a group id, a comma-separated list of group ids, or an array of group ids.'],
      ['GroupId empty array', { GroupId: [] }, /^Error: GroupId must have at least 1 item/],
      ['GroupId array of strings', { GroupId: ['1'] }, /^Error: GroupId.0 must be an integer/],
      ['GroupId an object', { GroupId: { Id: 1 } }, /^Error: GroupId must be an integer, a string or an array/],
      ['GroupId that does not exist', { GroupId: 999_999 }, 'Error: GroupId 999999 is not a group you may assign (see GET /Api/Read/Groups).'],
      ['GroupId allowing key creation', { GroupId: groups.keyAdmin }, `Error: GroupId ${groups.keyAdmin} is not a group you may assign (see GET /Api/Read/Groups).`],
      ['GroupId allowing key creation by wildcard', { GroupId: [groups.aclReader, groups.wildcard] }, `Error: GroupId ${groups.wildcard} is not a group you may assign (see GET /Api/Read/Groups).`],
      ['Defaults of another parent', { Defaults: { Parent: 2 } }, 'Error: Defaults.Parent must be your own Parent (1).'],
      ['Defaults with a negative Custno', { Defaults: { Custno: -1 } }, /^Error: Defaults\.Custno must be >= 0/],
      ['Defaults with an unknown member', { Defaults: { Tenant: 1 } }, 'Error: Defaults.Tenant is not a known field.'],
      ['an unknown field', { Colour: 'red' }, 'Error: Colour is not a known field.'],
      ['KeyId on create', { KeyId: 1 }, 'Error: KeyId is not a known field.'],
    ]
    for (const [label, fields, expected] of refused) {
      const answer = await create({ Display_Name: name(), ...base, ...fields })
      t.equal(answer.status, 400, label)
      t.match(answer.headers.get('content-type'), /^text\/plain/, label)
      if (typeof expected === 'string') t.equal(answer.text, expected, label)
      else t.match(answer.text, expected, label)
    }
    const notJson = await service.call('POST', '/Api/Create/Key', { today: true, rawBody: '{"Display_Name":', contentType: 'application/json' })
    t.equal(notJson.status, 400)
    const noDayCode = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: name(), ...base } })
    t.equal(noDayCode.status, 401, 'create needs the day code')
    const wrongDayCode = await service.call('POST', '/Api/Create/Key', { today: '00000000', body: { Display_Name: name(), ...base } })
    t.equal(wrongDayCode.status, 401)
  }),
)

t.test('Display_Name is unique per Parent, exactly, and race-free', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { service, groups, create, insertKey } = await keysFixture(t, kind)
    const first = await create({ Display_Name: 'Billing', GroupId: groups.aclReader })
    t.equal(first.status, 200, first.text)
    const again = await create({ Display_Name: 'Billing', GroupId: groups.people, Defaults: { Custno: 9 } })
    t.equal(again.status, 400)
    t.equal(again.text, "Error: Display Name 'Billing' is already defined.", 'unique across all customers of one parent')
    for (const distinct of ['billing', 'BILLING', 'Billing 2', 'Bílling']) {
      t.equal((await create({ Display_Name: distinct, GroupId: groups.aclReader })).status, 200, `'${distinct}' is another name`)
    }
    const quoted = "O'Brien \"ops\" 🔑"
    t.equal((await create({ Display_Name: quoted, GroupId: groups.aclReader })).status, 200)
    t.equal((await create({ Display_Name: quoted, GroupId: groups.aclReader })).text, `Error: Display Name '${quoted}' is already defined.`)

    const otherTenant = await insertKey({ display_name: 'Tenant 2 admin', parent: 2 }, [groups.keyAdmin, groups.aclReader])
    t.equal((await create({ Display_Name: 'Billing', GroupId: groups.aclReader }, otherTenant)).status, 200, 'another parent may use the name')

    for (let round = 0; round < 3; round++) {
      const racers = await Promise.all([1, 2, 3].map(() => create({ Display_Name: `Race ${round}`, GroupId: groups.aclReader })))
      const statuses = racers.map((answer) => answer.status).sort()
      t.same(statuses, [200, 400, 400], `round ${round}: one create wins, the others are told the name is taken`)
      for (const loser of racers.filter((answer) => answer.status === 400)) t.equal(loser.text, `Error: Display Name 'Race ${round}' is already defined.`)
    }
    const pair = await Promise.all([create({ Display_Name: 'Pair', GroupId: groups.aclReader }), create({ Display_Name: 'Pair', GroupId: groups.people })])
    t.same(pair.map((answer) => answer.status).sort(), [200, 400], 'two concurrent creates of one name: one 200, one 400')
    const stored = await service.kernel.database.db.selectFrom('api_keys').select('id').where('display_name', '=', 'Pair').execute()
    t.equal(stored.length, 1)
    const orphans = await service.kernel.database.db.selectFrom('api_key_groups').select('key_id').where('key_id', 'not in', service.kernel.database.db.selectFrom('api_keys').select('id')).execute()
    t.equal(orphans.length, 0, 'the losing create left no group rows behind')
  }),
)

t.test('privilege never grows and tenants stay apart on create', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { service, groups, create, insertKey } = await keysFixture(t, kind)
    const subAdmin = await insertKey({ display_name: 'Sub admin', created_by: service.admin.id }, [groups.keyAdmin, groups.aclReader])
    const customerAdmin = await insertKey({ display_name: 'Customer 7 admin', custno: 7 }, [groups.keyAdmin, groups.aclReader])
    const tenantB = await insertKey({ display_name: 'Tenant B admin', parent: 2, custno: 0 }, [groups.keyAdmin, groups.aclReader])

    const cases: [string, SigningKey, Record<string, unknown>, number, string?][] = [
      ['sub-admin assigns a group it holds', subAdmin, { GroupId: groups.aclReader }, 200],
      ['sub-admin assigns a group it lacks', subAdmin, { GroupId: groups.people }, 400, `Error: GroupId ${groups.people} is not a group you may assign (see GET /Api/Read/Groups).`],
      ['sub-admin hands on key creation', subAdmin, { GroupId: [groups.aclReader, groups.keyAdmin] }, 400, `Error: GroupId ${groups.keyAdmin} is not a group you may assign (see GET /Api/Read/Groups).`],
      ['customer admin inside its customer', customerAdmin, { GroupId: groups.aclReader, Defaults: { Parent: 1, Custno: 7 } }, 200],
      ['customer admin names another customer', customerAdmin, { GroupId: groups.aclReader, Defaults: { Custno: 8 } }, 400, 'Error: Defaults.Custno must be your own Custno (7).'],
      ['customer admin names the parent-wide customer', customerAdmin, { GroupId: groups.aclReader, Defaults: { Custno: 0 } }, 400, 'Error: Defaults.Custno must be your own Custno (7).'],
      ['tenant B inside its tenant', tenantB, { GroupId: groups.aclReader, Defaults: { Parent: 2, Custno: 3 } }, 200],
      ['tenant B names tenant A', tenantB, { GroupId: groups.aclReader, Defaults: { Parent: 1, Custno: 0 } }, 400, 'Error: Defaults.Parent must be your own Parent (2).'],
      ['tenant A names tenant B', service.admin, { GroupId: groups.aclReader, Defaults: { Parent: 2 } }, 400, 'Error: Defaults.Parent must be your own Parent (1).'],
      ['tenant A names a parent that does not exist: the same answer', service.admin, { GroupId: groups.aclReader, Defaults: { Parent: 77 } }, 400, 'Error: Defaults.Parent must be your own Parent (1).'],
    ]
    let serial = 0
    for (const [label, key, fields, status, text] of cases) {
      const answer = await create({ Display_Name: `Scoped ${++serial}`, ...fields }, key)
      t.equal(answer.status, status, `${label}: ${answer.text}`)
      if (text) t.equal(answer.text, text, label)
    }
    const db = service.kernel.database.db
    const placed = await db.selectFrom('api_keys').select(['display_name', 'parent', 'custno', 'created_by']).where('display_name', 'in', ['Scoped 1', 'Scoped 4', 'Scoped 7']).orderBy('display_name').execute()
    t.same(placed.map((row) => [row.display_name, Number(row.parent), Number(row.custno)]), [['Scoped 1', 1, 0], ['Scoped 4', 1, 7], ['Scoped 7', 2, 3]])

    const customerKey = await create({ Display_Name: 'Customer default', GroupId: groups.aclReader }, customerAdmin)
    const customerRow = await db.selectFrom('api_keys').select(['parent', 'custno', 'created_by']).where('id', '=', customerKey.json.Id).executeTakeFirstOrThrow()
    t.same([Number(customerRow.parent), Number(customerRow.custno), Number(customerRow.created_by)], [1, 7, customerAdmin.id], 'Defaults follow the caller')

    const child = await create({ Display_Name: 'Plain child', GroupId: groups.aclReader, Require_Https: 0 }, subAdmin)
    const childKey = { apiKey: child.json.Api_Key, secret: child.json.Api_Secret }
    t.equal((await service.call('POST', '/Api/Create/Key', { key: childKey, today: true, body: { Display_Name: 'Grandchild', GroupId: groups.aclReader } })).status, 403, 'a key without key creation cannot create keys')
    t.equal((await service.call('GET', '/Api/Read/Groups', { key: childKey })).status, 403)
  }),
)
