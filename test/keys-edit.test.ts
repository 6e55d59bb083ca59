/**
 * POST /Api/Edit/Key (interface 4.2) and key states (interface 3): who may edit what,
 * every field, all-or-nothing edits, the cache drop, and validity at the exact
 * boundaries on a fake clock. On SQLite and MariaDB.
 */
import t, { type Test } from 'tap'
import { forEachDatabase, startService, type DatabaseKind, type Service } from './helpers/service.ts'
import type { KeyFields } from '../kernel/auth/keyIssuer.ts'
import { insertKey, keyTestGroups } from './helpers/keys.ts'
import type { SigningKey } from '../kernel/auth/signature.ts'
import { httpDate } from '../kernel/auth/apiDate.ts'
import { createConnection } from 'mysql2/promise'

interface EditFixture {
  service: Service
  /** Moves the fake clock (it starts at a whole second near the real time). */
  clock: { now: number }
  groups: { keyAdmin: number; aclReader: number; people: number; reports: number }
  create(body: Record<string, unknown>, key?: SigningKey): Promise<SigningKey & { id: number }>
  edit(body: unknown, key?: SigningKey): ReturnType<Service['call']>
  listed(id: number, key?: SigningKey): Promise<Record<string, any>>
  insertKey(fields: Partial<KeyFields> & { display_name: string }, groupIds: number[]): Promise<SigningKey & { id: number }>
}

async function editFixture(t: Test, kind: DatabaseKind): Promise<EditFixture> {
  // Near the real time, so x-apidate (signed with the real clock) stays inside the window.
  const clock = { now: Math.floor(Date.now() / 1000) * 1000 }
  const service = await startService(t, { kind, clock: () => clock.now })
  const groups = await keyTestGroups(service)
  let serial = 0
  const fixture: EditFixture = {
    service,
    clock,
    groups,
    async create(body, key = service.admin) {
      const answer = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: `Key ${++serial}`, GroupId: groups.aclReader, Require_Https: 0, ...body }, today: true, key })
      if (answer.status !== 200) throw new Error(`create failed: ${answer.status} ${answer.text}`)
      return { id: answer.json.Id, apiKey: answer.json.Api_Key, secret: answer.json.Api_Secret }
    },
    edit: (body, key = service.admin) => service.call('POST', '/Api/Edit/Key', { body, today: true, key }),
    async listed(id, key = service.admin) {
      const answer = await service.call('GET', '/Api/Read/Keys', { key })
      return answer.json.find((item: { Id: number }) => item.Id === id)
    },
    insertKey: (fields, groupIds) => insertKey(service, fields, groupIds, clock.now),
  }
  return fixture
}

t.test('which key an edit names, and who may edit it', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { service, groups, create, edit, insertKey } = await editFixture(t, kind)
    const childA = await create({})
    const childB = await create({})
    const subAdmin = await insertKey({ display_name: 'Sub admin', created_by: service.admin.id }, [groups.keyAdmin, groups.aclReader])
    const grandchild = await create({}, subAdmin)
    const tenantB = await insertKey({ display_name: 'Tenant B admin', parent: 2 }, [groups.keyAdmin, groups.aclReader])
    const tenantBChild = await create({}, tenantB)
    const unknownApiKey = 'kg_AAAAAAAAAAAAAAAAAAAAAA'
    const notFound = 'Error: Key not found.'

    const cases: [string, SigningKey, Record<string, unknown>, number, string][] = [
      ['neither KeyId nor ApiKey', service.admin, { Email: 'a@example.com' }, 400, 'Error: KeyId or ApiKey is required.'],
      ['an empty body', service.admin, {}, 400, 'Error: KeyId or ApiKey is required.'],
      ['KeyId and ApiKey of two keys', service.admin, { KeyId: childA.id, ApiKey: childB.apiKey }, 400, 'Error: KeyId and ApiKey do not name the same key.'],
      // An ApiKey that names no key is not found (D6), whatever KeyId says.
      ['KeyId and an unknown ApiKey', service.admin, { KeyId: childA.id, ApiKey: unknownApiKey }, 404, notFound],
      ['an unknown KeyId and an unknown ApiKey', service.admin, { KeyId: 999_999, ApiKey: unknownApiKey }, 404, notFound],
      ['an unknown KeyId and a known ApiKey', service.admin, { KeyId: 999_999, ApiKey: childB.apiKey }, 400, 'Error: KeyId and ApiKey do not name the same key.'],
      ['KeyId 0', service.admin, { KeyId: 0 }, 400, 'Error: KeyId must be >= 1.'],
      ['KeyId as a string', service.admin, { KeyId: String(childA.id) }, 400, 'Error: KeyId must be an integer.'],
      ['an unknown KeyId', service.admin, { KeyId: 999_999 }, 404, notFound],
      ['an unknown ApiKey', service.admin, { ApiKey: unknownApiKey }, 404, notFound],
      ['the caller itself by KeyId', service.admin, { KeyId: service.admin.id }, 404, notFound],
      ['the caller itself by ApiKey', service.admin, { ApiKey: service.admin.apiKey, KeyId: service.admin.id }, 404, notFound],
      ['a key of the caller\'s child', service.admin, { KeyId: grandchild.id }, 404, notFound],
      ['another tenant\'s key', service.admin, { KeyId: tenantBChild.id }, 404, notFound],
      ['a child edits its parent', subAdmin, { KeyId: service.admin.id }, 404, notFound],
      ['a child edits a sibling', subAdmin, { KeyId: childA.id }, 404, notFound],
      ['a child edits a sibling by ApiKey', subAdmin, { ApiKey: childB.apiKey }, 404, notFound],
      ['a child edits itself', subAdmin, { KeyId: subAdmin.id }, 404, notFound],
      ['tenant B edits tenant A\'s key', tenantB, { KeyId: childA.id, Display_Name: 'Hijacked' }, 404, notFound],
      ['tenant B edits tenant A\'s admin', tenantB, { ApiKey: service.admin.apiKey }, 404, notFound],
      ['a child gives its key a group it lacks', subAdmin, { KeyId: grandchild.id, GroupId: groups.people }, 400, `Error: GroupId ${groups.people} is not a group you may assign (see GET /Api/Read/Groups).`],
      ['a child gives its key key creation', subAdmin, { KeyId: grandchild.id, GroupId: groups.keyAdmin }, 400, `Error: GroupId ${groups.keyAdmin} is not a group you may assign (see GET /Api/Read/Groups).`],
      ['the root gives a key key creation', service.admin, { KeyId: childA.id, GroupId: `${groups.aclReader},${groups.keyAdmin}` }, 400, `Error: GroupId ${groups.keyAdmin} is not a group you may assign (see GET /Api/Read/Groups).`],
      ['tenant B moves its key to tenant A', tenantB, { KeyId: tenantBChild.id, Defaults: { Parent: 1 } }, 400, 'Error: Defaults.Parent must be your own Parent (2).'],
      // MariaDB's collation ignores trailing spaces; the answer must not depend on the database.
      ['an ApiKey with a trailing space', service.admin, { ApiKey: `${childA.apiKey} `, Email: 'pad@example.com' }, 404, notFound],
      ['KeyId and its ApiKey with trailing spaces', service.admin, { KeyId: childA.id, ApiKey: `${childA.apiKey}   ` }, 404, notFound],
    ]
    for (const [label, key, body, status, text] of cases) {
      const answer = await edit(body, key)
      t.equal(answer.status, status, label)
      t.equal(answer.text, text, label)
    }
    const byBoth = await edit({ KeyId: childA.id, ApiKey: childA.apiKey })
    t.equal(byBoth.status, 200, byBoth.text)
    t.same(byBoth.json, { Id: childA.id, Api_Key: childA.apiKey, Api_Secret: childA.secret, Name: 'Key 1', MaxHits: '' })
    t.equal((await edit({ ApiKey: grandchild.apiKey, Email: 'mine@example.com' }, subAdmin)).status, 200, 'a key edits the keys it created')
    t.equal((await edit({ KeyId: tenantBChild.id, Defaults: { Parent: 2, Custno: 5 } }, tenantB)).status, 200)

    const db = service.kernel.database.db
    const rows = await db.selectFrom('api_keys').select(['id', 'display_name', 'parent']).where('id', 'in', [childA.id, service.admin.id, tenantBChild.id]).orderBy('id').execute()
    t.same(rows.map((row) => [Number(row.id), row.display_name, Number(row.parent)]), [[service.admin.id, 'Root administrator', 1], [childA.id, 'Key 1', 1], [tenantBChild.id, 'Key 4', 2]], 'refused edits changed nothing')
    const childGroups = await db.selectFrom('api_key_groups').select('group_id').where('key_id', '=', childA.id).execute()
    t.same(childGroups.map((row) => Number(row.group_id)), [groups.aclReader], 'a refused group change left the assignment as it was')

    const plain = await create({ GroupId: groups.aclReader })
    t.equal((await service.call('POST', '/Api/Edit/Key', { key: plain, today: true, body: { KeyId: plain.id } })).status, 403, 'a key without key administration cannot edit')
  }),
)

t.test('every field can be edited, and each edit counts on the next call', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { service, groups, create, edit, listed } = await editFixture(t, kind)
    const key = await create({ Email: 'first@example.com', Phone: '+1 555 0100', MaxHits: '5/1Sec' })
    const acl = () => service.call('GET', '/Api/Read/Acl', { key })
    t.equal((await acl()).status, 200)

    const changes: [string, Record<string, unknown>, Record<string, unknown>][] = [
      ['Display_Name', { Display_Name: 'Renamed ключ' }, { Display_Name: 'Renamed ключ' }],
      ['Email and Phone', { Email: 'second@example.com', Phone: '+44 20 7946 0000' }, { Email: 'second@example.com', Phone: '+44 20 7946 0000' }],
      ['Email and Phone cleared', { Email: null, Phone: '' }, { Email: null, Phone: null }],
      ['StartDate and EndDate', { StartDate: '2020-01-01T00:00:00Z', EndDate: 'Fri, 01 Jan 2100 00:00:00 GMT' }, { StartDate: 'Wed, 01 Jan 2020 00:00:00 GMT', EndDate: 'Fri, 01 Jan 2100 00:00:00 GMT', Active: 1 }],
      ['AllowHours', { AllowHours: 1.5 }, { AllowHours: 1.5 }],
      ['AllowHours back to the default', { AllowHours: null }, { AllowHours: null }],
      ['LogLevel and LogRaw', { LogLevel: 2, LogRaw: 5 }, { LogLevel: 2, LogRaw: 5 }],
      ['MaxHits', { MaxHits: '100/1hour,10/1sec' }, { MaxHits: '10/1Sec,100/1Hour' }],
      ['MaxHits cleared', { MaxHits: null }, { MaxHits: '' }],
      ['Custno of a parent-wide caller', { Defaults: { Custno: 12 } }, { Parent: 1, Custno: 12 }],
      ['GroupId', { GroupId: [groups.aclReader, groups.people] }, { Groups: [{ Id: groups.aclReader, Display_Name: 'Access list reader' }, { Id: groups.people, Display_Name: 'People readers' }] }],
    ]
    for (const [label, body, expected] of changes) {
      const answer = await edit({ KeyId: key.id, ...body })
      t.equal(answer.status, 200, `${label}: ${answer.text}`)
      t.match(await listed(key.id), expected, label)
    }
    t.equal((await edit({ KeyId: key.id, Display_Name: 'Renamed ключ' })).status, 200, 'keeping its own name is no conflict')

    // Each of these changes how the key authenticates; the cached auth record must not outlive the edit.
    t.equal((await acl()).status, 200)
    t.equal((await edit({ KeyId: key.id, ResponseFormat: 'xml' })).status, 200)
    t.match((await acl()).text, /^<\?xml/, 'ResponseFormat applies on the next call')
    t.equal((await edit({ KeyId: key.id, ResponseFormat: 'json', DayPass: 1 })).status, 200)
    t.equal((await acl()).status, 401, 'DayPass 1: a call without the day code is refused')
    t.equal((await service.call('GET', '/Api/Read/Acl', { key, today: true })).status, 200, 'and one with it passes')
    t.equal((await edit({ KeyId: key.id, DayPass: 0, Require_Hash: 1 })).status, 200)
    t.equal((await acl()).status, 401, 'Require_Hash 1: a sha256 signature is refused')
    t.equal((await service.call('GET', '/Api/Read/Acl', { key, hashMethod: 1 })).status, 200, 'and an md5 one passes')
    t.equal((await edit({ KeyId: key.id, Require_Hash: null, Require_Https: 1 })).status, 200)
    t.equal((await acl()).status, 403, 'Require_Https 1 over plain HTTP')
    t.equal((await edit({ KeyId: key.id, Require_Https: 0, MaxHits: '2/1Min' })).status, 200)
    const limited = [await acl(), await acl(), await acl()]
    t.same(limited.map((answer) => answer.status), [200, 200, 429], 'MaxHits applies on the next call')
  }),
)

t.test('an edit is all or nothing; names stay unique', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { service, groups, create, edit, listed } = await editFixture(t, kind)
    const taken = await create({ Display_Name: 'Taken' })
    const key = await create({ Display_Name: 'Mine', Email: 'keep@example.com', GroupId: groups.aclReader, EndDate: '2031-01-01T00:00:00Z' })
    const before = await listed(key.id)

    const refused: [string, Record<string, unknown>, number, string][] = [
      ['a taken name with other changes', { Display_Name: 'Taken', Email: 'lost@example.com', GroupId: groups.people, LogLevel: 3 }, 400, "Error: Display Name 'Taken' is already defined."],
      ['a good name with a group the caller may not assign', { Display_Name: 'Fresh', GroupId: [groups.people, groups.keyAdmin] }, 400, `Error: GroupId ${groups.keyAdmin} is not a group you may assign (see GET /Api/Read/Groups).`],
      ['good fields with a bad date', { Email: 'lost@example.com', EndDate: 'soon' }, 400, 'Error: EndDate must be an HTTP-date (Sun, 22 Nov 2026 08:49:37 GMT) or RFC 3339 (2026-11-22T08:49:37Z).'],
      ['EndDate before StartDate in one body', { StartDate: '2030-01-02T00:00:00Z', EndDate: '2030-01-01T00:00:00Z' }, 400, 'Error: EndDate must be after StartDate.'],
      ['good fields with a bad MaxHits', { LogLevel: 4, MaxHits: '1/1Fortnight' }, 400, "Error: MaxHits item '1/1Fortnight' is not of the form <count>/<n><Sec|Min|Hour|Day|Mon>, e.g. 10/1Sec,1000/1Hour"],
      ['good fields with another parent', { Email: 'lost@example.com', Defaults: { Parent: 2 } }, 400, 'Error: Defaults.Parent must be your own Parent (1).'],
      ['an empty Display_Name', { Display_Name: '' }, 400, 'Error: Display_Name must not be empty.'],
      ['an empty GroupId list', { GroupId: [] }, 400, 'Error: GroupId must have at least 1 item.'],
      ['an unknown field', { Secret: 'x' }, 400, 'Error: Secret is not a known field.'],
      ['StartDate alone after the stored EndDate', { StartDate: '2031-01-01T00:00:00Z' }, 400, "Error: StartDate must be before the key's EndDate (Wed, 01 Jan 2031 00:00:00 GMT); send EndDate too (null for none)."],
      ['StartDate alone at the stored EndDate', { StartDate: '2031-01-01T00:00:00Z', Email: 'lost@example.com' }, 400, "Error: StartDate must be before the key's EndDate (Wed, 01 Jan 2031 00:00:00 GMT); send EndDate too (null for none)."],
    ]
    for (const [label, body, status, text] of refused) {
      const answer = await edit({ KeyId: key.id, ...body })
      t.equal(answer.status, status, label)
      t.equal(answer.text, text, label)
      t.same(await listed(key.id), before, `${label}: nothing changed`)
    }

    t.equal((await edit({ KeyId: key.id, StartDate: '2030-12-31T00:00:00Z' })).status, 200, 'StartDate alone before the stored EndDate')
    t.equal((await edit({ KeyId: key.id, StartDate: null })).status, 200, 'StartDate null: from now')
    t.equal((await edit({ KeyId: key.id, StartDate: '2031-06-01T00:00:00Z', EndDate: null })).status, 200, 'StartDate later with EndDate moved in the same body')
    t.equal((await edit({ KeyId: key.id, Display_Name: 'Free' })).status, 200)
    t.equal((await edit({ KeyId: taken.id, Display_Name: 'Mine' })).status, 200, 'the old name is free after a rename')
    const c = await create({ Display_Name: 'Racer C' })
    const d = await create({ Display_Name: 'Racer D' })
    const race = await Promise.all([edit({ KeyId: c.id, Display_Name: 'Contested' }), edit({ KeyId: d.id, Display_Name: 'Contested' })])
    t.same(race.map((answer) => answer.status).sort(), [200, 400], 'two concurrent renames to one name: one 200, one 400')
    t.equal(race.find((answer) => answer.status === 400)!.text, "Error: Display Name 'Contested' is already defined.")
  }),
)

t.test('a key works from StartDate up to, not including, EndDate', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { service, clock, create, edit, listed } = await editFixture(t, kind)
    const origin = clock.now
    const start = origin + 10_000
    const end = origin + 20_000
    // AllowHours 0: the key's own x-apidate check is off, so only the validity dates decide.
    const key = await create({ StartDate: httpDate(start), EndDate: new Date(end).toISOString(), AllowHours: 0 })
    const boundaries: [string, number, number, 0 | 1][] = [
      ['1 ms before StartDate', start - 1, 401, 0],
      ['at StartDate', start, 200, 1],
      ['1 ms before EndDate', end - 1, 200, 1],
      ['at EndDate', end, 401, 0],
      ['after EndDate', end + 60_000, 401, 0],
    ]
    for (const [label, at, status, active] of boundaries) {
      clock.now = at
      const answer = await service.call('GET', '/Api/Read/Acl', { key })
      t.equal(answer.status, status, label)
      if (status === 401) t.equal(answer.text, 'Error: Unknown or inactive API key.', label)
      t.equal((await listed(key.id)).Active, active, `${label}: Active`)
    }

    clock.now = origin + 30_000
    const open = await create({ AllowHours: 0 })
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: open })).status, 200, 'StartDate defaults to now: the key works at once')
    t.equal((await listed(open.id)).StartDate, httpDate(clock.now))
    // Disabling sets EndDate to now: inactive from that very instant.
    t.equal((await edit({ KeyId: open.id, EndDate: httpDate(clock.now) })).status, 200)
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: open })).status, 401, 'disabled: 401 at once')
    t.match(await listed(open.id), { Active: 0, EndDate: httpDate(clock.now) })

    const future = await create({ StartDate: httpDate(origin + 3_600_000), AllowHours: 0 })
    t.equal((await edit({ KeyId: future.id, EndDate: httpDate(clock.now) })).status, 200, 'disabling a key that has not started yet is allowed')
    t.equal((await edit({ KeyId: key.id, EndDate: null })).status, 200, 'an expired key comes back when EndDate is cleared')
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200)
  }),
)

t.test('a key disabled while a call is loading it is not kept loaded', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // The race is staged by making the load wait for a table lock between its queries:
    // SQLite's readers never wait (WAL), so only MariaDB can show it.
    if (kind === 'sqlite') return void t.pass('staged on MariaDB only: SQLite readers never wait for a lock')
    const { service, create, edit, clock } = await editFixture(t, kind)
    const key = await create({ Display_Name: 'Loading' })
    const locker = await createConnection(service.config.databaseUrl!)
    t.teardown(() => locker.end())
    // The call reads the key's row, then waits for its groups behind the lock.
    await locker.query('LOCK TABLES api_key_groups WRITE')
    const loading = service.call('GET', '/Api/Read/Acl', { key })
    for (let tries = 0; ; tries++) {
      const [rows] = await locker.query('SHOW FULL PROCESSLIST') as unknown as [{ State: string | null; Info: string | null }[]]
      if (rows.some((row) => /api_key_groups/.test(row.Info ?? '') && /lock/i.test(row.State ?? ''))) break
      if (tries === 100) throw new Error('the call never waited for the lock')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    t.equal((await edit({ KeyId: key.id, EndDate: httpDate(clock.now) })).status, 200, 'disabled while the call loads the key')
    await locker.query('UNLOCK TABLES')
    t.equal((await loading).status, 200, 'the call that began before the disable answers as it began')
    const next = await service.call('GET', '/Api/Read/Acl', { key })
    t.equal(next.status, 401, 'the next call reads the key again: what the load read before the disable was not kept')
    t.equal(next.text, 'Error: Unknown or inactive API key.')
  }),
)
