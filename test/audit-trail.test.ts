/**
 * Issue 16 item 4: the audit trail. Every administrative change through the API leaves
 * exactly one record with the right before/after (never a secret), written in the
 * change's transaction; a refused edit leaves none; another tenant's records are
 * invisible; only a key that may create keys reads them. On SQLite and MariaDB.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'
import { adminOn } from './helpers/adminCli.ts'
import { insertKey, keyTestGroups, rootGroupIds } from './helpers/keys.ts'
import { AuditRetention } from '../kernel/audit/auditRetention.ts'

t.test('one record per change, with before/after, request id and no secret', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const groups = await keyTestGroups(service)
    const audit = async (body: Record<string, unknown> = {}, key = service.admin) => {
      const answer = await service.call('POST', '/Api/Read/Audit', { body, key })
      t.equal(answer.status, 200, answer.text)
      return answer.json
    }
    t.same(await audit(), { Total: 0, Page: 1, Records: [] }, 'nothing yet')

    const created = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Audited', GroupId: groups.aclReader, Require_Https: 0 } })
    t.equal(created.status, 200)
    const keyId = created.json.Id
    const edited = await service.call('POST', '/Api/Edit/Key', { today: true, body: { KeyId: keyId, Email: 'ops@example.com', MaxHits: '10/1Min', GroupId: [groups.aclReader, groups.people] } })
    t.equal(edited.status, 200)
    const failed = await service.call('POST', '/Api/Edit/Key', { today: true, body: { KeyId: keyId, Email: 'x@example.com', MaxHits: 'lots' } })
    t.equal(failed.status, 400, 'a refused edit')
    const unknown = await service.call('POST', '/Api/Edit/Key', { today: true, body: { KeyId: 999_999, Email: 'x@example.com' } })
    t.equal(unknown.status, 404)
    for (const body of [{ KeyId: keyId }, { KeyId: keyId, Display_Name: 'Audited', Email: 'ops@example.com', GroupId: [groups.people, groups.aclReader] }]) {
      const same = await service.call('POST', '/Api/Edit/Key', { today: true, body })
      t.equal(same.status, 200, 'an edit that changes nothing is accepted')
    }
    const rotated = await service.call('POST', '/Api/Rotate/Key', { today: true, body: { KeyId: keyId, OldSecretValidFor: 60 } })
    t.equal(rotated.status, 200)

    const all = await audit()
    t.equal(all.Total, 3, 'create, edit and rotate: three records; the refused edits and those that change nothing none')
    const [rotation, edit, creation] = all.Records
    t.same(Object.keys(creation), ['Id', 'At', 'Who', 'Parent', 'Custno', 'Action', 'KeyId', 'Before', 'After', 'RequestId'])
    t.match(creation, { Who: service.admin.id, Parent: 1, Custno: 0, Action: 'key.create', KeyId: keyId, Before: null, RequestId: Number(created.headers.get('x-requestid')) })
    t.match(creation.After, { Display_Name: 'Audited', Parent: 1, Custno: 0, GroupId: [groups.aclReader], Require_Https: 0 })
    t.notOk('Created_By' in creation.After, 'the creator is Who; no field the API has no name for')
    t.match(creation.After.StartDate, /GMT$/, 'fields as the API names them, dates as HTTP-dates (D9)')
    t.match(creation.At, /GMT$/)
    t.match(edit, { Who: service.admin.id, Action: 'key.edit', KeyId: keyId, RequestId: Number(edited.headers.get('x-requestid')) })
    t.same(edit.Before, { Email: null, MaxHits: '', GroupId: [groups.aclReader] })
    t.same(edit.After, { Email: 'ops@example.com', MaxHits: '10/1Min', GroupId: [groups.aclReader, groups.people].sort((a, b) => a - b) })
    t.match(rotation, { Who: service.admin.id, Action: 'key.rotate', KeyId: keyId, RequestId: Number(rotated.headers.get('x-requestid')) })
    t.same(rotation.Before, { OldSecretEnds: null })
    t.equal(rotation.After.OldSecretEnds, rotated.json.OldSecretEnds)
    const text = JSON.stringify(all)
    t.notOk(text.includes(created.json.Api_Secret) || text.includes(rotated.json.Api_Secret), 'no secret in any record')
    t.notOk(/secret_enc/.test(text), 'no sealed secret either')

    // Filters and paging.
    t.equal((await audit({ KeyId: keyId })).Total, 3)
    t.equal((await audit({ KeyId: 999_999 })).Total, 0)
    t.equal((await audit({ from: new Date(Date.now() + 3_600_000).toISOString() })).Total, 0, 'from after every record')
    t.equal((await audit({ to: '2020-01-01' })).Total, 0, 'to before every record')
    t.equal((await audit({ from: '2020-01-01', to: new Date(Date.now() + 3_600_000).toISOString() })).Total, 3)
    t.same((await audit({ page: 2 })).Records, [], 'page 2 of 3 records is empty')
    // to is inclusive, as History's: a date alone takes in its whole day, a record's At (whole seconds) finds it.
    const today = new Date().toISOString().slice(0, 10)
    if (all.Records.every((record: { At: string }) => new Date(record.At).toISOString().startsWith(today))) {
      t.equal((await audit({ from: today, to: today })).Total, 3, 'from = to = today: the whole day')
    }
    t.ok((await audit({ from: rotation.At, to: rotation.At })).Records.some((record: { Id: number }) => record.Id === rotation.Id), 'from = to = a record\'s At finds it')
    t.equal((await audit({ to: creation.At })).Records.at(-1).Id, creation.Id, 'to = At takes in that second')
    for (const [name, body, message] of [
      ['a bad date', { from: 'yesterday' }, 'Error: from must be a date (HTTP-date, RFC 3339 or YYYY-MM-DD).'],
      ['from after to', { from: '2026-02-01', to: '2026-01-01' }, 'Error: from must not be after to.'],
      ['an unknown filter', { Who: 1 }, null],
    ] as const) {
      const answer = await service.call('POST', '/Api/Read/Audit', { body })
      t.equal(answer.status, 400, name)
      if (message) t.equal(answer.text, message, name)
      else t.match(answer.text, /^Error: /, name)
    }
  }),
)

t.test('an API edit that ends a key, starts it again or changes only its credits is named so', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const groups = await keyTestGroups(service)
    const created = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Lifecycle', GroupId: groups.aclReader, Require_Https: 0 } })
    t.equal(created.status, 200, created.text)
    const keyId = created.json.Id
    const edit = async (body: Record<string, unknown>) => {
      const answer = await service.call('POST', '/Api/Edit/Key', { today: true, body: { KeyId: keyId, ...body } })
      t.equal(answer.status, 200, answer.text)
    }
    const ended = new Date(Date.now() - 1000).toISOString()
    await edit({ EndDate: ended })
    await edit({ EndDate: null })
    await edit({ Credits: 50, Refill: { Amount: 50, Every: '1Day' } })
    await edit({ AddCredits: 5 })
    await edit({ Email: 'still@example.com', Credits: 10 })
    await edit({ Refill: { Amount: 50, Every: '1Mon' } })
    await edit({ Refill: { Amount: 70, Every: '1Mon' } })
    await edit({ Credits: null })
    const records = (await service.call('POST', '/Api/Read/Audit', { body: { KeyId: keyId } })).json.Records.reverse()
    t.same(records.map((record: { Action: string }) => record.Action), ['key.create', 'key.disable', 'key.enable', 'key.credits', 'key.credits', 'key.edit', 'key.credits', 'key.credits', 'key.credits'])
    t.same(records[1].Before, { EndDate: null })
    t.equal(records[1].After.EndDate, new Date(Math.floor(Date.parse(ended) / 1000) * 1000).toUTCString(), 'EndDate as an HTTP-date')
    t.same(records[2].After, { EndDate: null })
    t.same(records[3].Before, { Credits: null, Refill: null })
    t.same(records[3].After, { Credits: 50, Refill: { Amount: 50, Every: '1Day' } }, 'the Refill as sent; its next date has no API name')
    t.same(records[4].After, { Credits: 55 })
    t.same(records[5].After, { Email: 'still@example.com', Credits: 10 })
    t.same(records[6].Before, { Refill: { Amount: 50, Every: '1Day' } }, 'only Every changed: the whole Refill on each side')
    t.same(records[6].After, { Refill: { Amount: 50, Every: '1Mon' } })
    t.same(records[7].Before, { Refill: { Amount: 50, Every: '1Mon' } }, 'only Amount changed')
    t.same(records[7].After, { Refill: { Amount: 70, Every: '1Mon' } })
    t.same(records[8].Before, { Credits: 10, Refill: { Amount: 70, Every: '1Mon' } })
    t.same(records[8].After, { Credits: null, Refill: null }, 'a Refill ended is null')
  }),
)

t.test("another tenant's records are invisible; only keys that may create keys read them", (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const groups = await keyTestGroups(service)
    const tenantB = await insertKey(service, { display_name: 'Tenant B admin', parent: 2, custno: 0 }, await rootGroupIds(service))
    const madeByB = await service.call('POST', '/Api/Create/Key', { key: tenantB, today: true, body: { Display_Name: 'B child', GroupId: groups.aclReader, Require_Https: 0 } })
    t.equal(madeByB.status, 200, madeByB.text)
    const madeByA = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'A child', GroupId: groups.aclReader, Require_Https: 0 } })
    t.equal(madeByA.status, 200)
    const seenByA = await service.call('POST', '/Api/Read/Audit', { body: {} })
    t.same(seenByA.json.Records.map((record: { KeyId: number }) => record.KeyId), [madeByA.json.Id], 'tenant A sees its own record only')
    const seenByB = await service.call('POST', '/Api/Read/Audit', { key: tenantB, body: {} })
    t.same(seenByB.json.Records.map((record: { KeyId: number }) => record.KeyId), [madeByB.json.Id], 'tenant B sees its own record only')
    t.equal((await service.call('POST', '/Api/Read/Audit', { key: tenantB, body: { KeyId: madeByA.json.Id } })).json.Total, 0, 'not even by KeyId')

    // A key holding the audit path but no key creation is refused.
    const rotationGroup = (await service.call('GET', '/Api/Read/Groups')).json.find((group: { Paths: string[] }) => group.Paths.includes('/Api/Read/Audit'))
    const reader = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Audit only', GroupId: rotationGroup.Id, Require_Https: 0 } })
    t.equal(reader.status, 200, reader.text)
    const refused = await service.call('POST', '/Api/Read/Audit', { key: { apiKey: reader.json.Api_Key, secret: reader.json.Api_Secret }, body: {} })
    t.equal(refused.status, 403)
    t.equal(refused.text, 'Error: Only a key that may create keys reads the audit trail.')
    // XML and CSV.
    const xml = await service.call('POST', '/Api/Read/Audit?format=xml', { body: {} })
    t.match(xml.text, /<Audit>[\s\S]*<Record>[\s\S]*<Action>key.create<\/Action>/)
    t.equal(xml.text.match(/<Record>/g)?.length, 2, 'one <Record> per record, as History has one <Call> per call')
    t.notOk(xml.text.includes('<Records>'))
    const csv = await service.call('POST', '/Api/Read/Audit?format=csv', { body: {} })
    t.equal(csv.status, 200)
    t.equal(csv.headers.get('x-total-count'), '2')

    // A key in Parent 0 (an earlier version let the operator make one): the installation's records stay the operator's.
    const legacy = await insertKey(service, { display_name: 'Legacy installation admin', parent: 0, custno: 0 }, await rootGroupIds(service))
    const installation = await service.call('POST', '/Api/Read/Audit', { key: legacy, body: {} })
    t.equal(installation.status, 403)
    t.equal(installation.text, "Error: Parent 0 is the installation's: its audit trail is read by the operator, not by a key.")
  }),
)

t.test('records past the retention are purged', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const clock = { now: Date.now() }
    const service = await startService(t, { kind, clock: () => clock.now })
    const groups = await keyTestGroups(service)
    t.equal((await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Old', GroupId: groups.aclReader, Require_Https: 0 } })).status, 200)
    const retention = new AuditRetention(service.kernel.database.db, () => clock.now, 365)
    t.equal(await retention.purge(), 0, 'a fresh record stays')
    clock.now += 365 * 86_400_000 + 1
    t.equal(await retention.purge(), 1, 'a record older than the retention goes')
    const left = await service.kernel.database.db.selectFrom('api_audit').select('id').execute()
    t.equal(left.length, 0)

    // Started, the first pass runs shortly after, not only when the first hour is up.
    clock.now = Date.now()
    t.equal((await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Older', GroupId: groups.aclReader, Require_Https: 0 } })).status, 200)
    t.equal((await service.kernel.database.db.selectFrom('api_audit').select('id').execute()).length, 1)
    clock.now += 365 * 86_400_000 + 1
    const errors: unknown[] = []
    const started = new AuditRetention(service.kernel.database.db, () => clock.now, 365)
    started.start(60 * 60_000, (error) => errors.push(error), 50)
    t.teardown(() => started.stop())
    const deadline = Date.now() + 5000
    while ((await service.kernel.database.db.selectFrom('api_audit').select('id').execute()).length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
    t.equal((await service.kernel.database.db.selectFrom('api_audit').select('id').execute()).length, 0, 'purged within moments of start')
    t.same(errors, [])
    started.stop()
  }),
)

// SQLite only: each command is a process start (seconds); the kernel code is shared with the API.
t.test('operator changes through the CLI leave one record each, by operator', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const admin = (...words: string[]) => adminOn(service, ...words)
  const records = () => service.kernel.database.db.selectFrom('api_audit').selectAll().orderBy('id').execute()
  const target = await insertKey(service, { display_name: 'Operated', parent: 5, custno: 0 }, [])
  const steps: [string[], string, number, number][] = [
    [['tenant', 'set', '--parent', '5', '--custno', '0', '--max-keys', '3'], 'tenant.set', 5, 0],
    [['player', 'add', '--parent', '5', '--custno', '0', '--name', 'Lobby', '--json'], 'player.add', 5, 0],
    [['key', 'disable', String(target.id)], 'key.disable', 5, 0],
    [['key', 'enable', String(target.id)], 'key.enable', 5, 0],
    [['group', 'add', '--name', 'Audited group'], 'group.add', 0, 0],
    [['acl', 'add', '--path', '/Audited/*', '--name', 'Audited'], 'acl.add', 0, 0],
  ]
  for (const [words, action, parent, custno] of steps) {
    const before = (await records()).length
    const run = await admin(...words)
    t.equal(run.code, 0, `${words.join(' ')}: ${run.stderr}`)
    const after = await records()
    t.equal(after.length, before + 1, `${action}: exactly one record`)
    t.match(after.at(-1), { action, who_key_id: null, parent, custno })
  }
  const all = await records()
  t.same(JSON.parse(all[2].before!), { end_date: null })
  t.type(JSON.parse(all[2].after!).end_date, 'number')
  t.match(JSON.parse(all[0].after!), { MaxKeys: 3 })
  const player = JSON.parse((all[1].after!)) as { id: number }
  const removed = await admin('player', 'remove', '--id', String(player.id))
  t.equal(removed.code, 0, removed.stderr)
  t.match((await records()).at(-1), { action: 'player.remove', parent: 5 })
  const aclId = JSON.parse(all[5].after!).id as number
  t.equal((await admin('acl', 'remove', String(aclId))).code, 0)
  t.match((await records()).at(-1), { action: 'acl.remove' })
  // A refused command writes nothing.
  const count = (await records()).length
  t.not((await admin('tenant', 'set', '--parent', '5', '--custno', '0', '--timezone', 'Mars/Olympus_Mons')).code, 0)
  t.not((await admin('key', 'disable', '999999')).code, 0)
  const empty = await admin('tenant', 'set', '--parent', '5', '--custno', '0', '--max-hits', '')
  t.equal(empty.code, 2, 'an empty --max-hits is refused, not taken as none')
  t.match(empty.stderr, '--max-hits needs a MaxHits value such as 100000/1Mon, or none')
  t.equal((await records()).length, count, 'no record for a refused command')
  const again = await admin('tenant', 'set', '--parent', '5', '--custno', '0', '--max-keys', '3')
  t.equal(again.code, 0, again.stderr)
  t.match(again.stderr, 'admin: tenant 5/0 already has these settings; nothing changed')
  t.equal((await records()).length, count, 'no record for a tenant set that changes nothing')
  t.notOk(JSON.stringify(await records()).includes('secret'), 'no secret anywhere')

  // Read back, the CLI's records name fields as the API does too.
  const read = await service.kernel.services.keys.audit({ parent: 5, custno: null, page: 1, size: 100 })
  const disabled = read.Records.find((record) => record.Action === 'key.disable')!
  t.same(disabled.Before, { EndDate: null })
  t.match((disabled.After as { EndDate: string }).EndDate, /GMT$/)
  t.match(read.Records.find((record) => record.Action === 'player.add')!.After, { Id: Number, Name: 'Lobby' })
})
