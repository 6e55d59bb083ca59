/**
 * Issue 17: the events that are noticed rather than made by an edit. key.usage from
 * credits (80 % and 100 % of a Refill Amount, or of the count as last set without a
 * Refill; an upgraded key's count as it was) and from a
 * tenant quota; key.expiring at 7 days and at 1 day before EndDate, once each, also
 * across a restart; the operator CLI's `key disable` / `key enable` make key.disabled /
 * key.changed like the API; webhooks.maxPerTenant. On SQLite and MariaDB.
 */
import t from 'tap'
import { UsageEvents } from '../kernel/events/usageEvents.ts'
import type { EventBus, KernelEvent } from '../kernel/events/events.ts'
import type { CallerKey } from '../kernel/plugin.ts'
import { sql } from 'kysely'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
// The operator CLI on the service's database, with the default plugins (the webhooks outbox among them).
import { adminOn as admin } from './helpers/adminCli.ts'
import { insertKey, keyTestGroups } from './helpers/keys.ts'
import { setEntitlement } from './helpers/tenants.ts'
import { fastWebhooks, startReceiver, type Receiver } from './helpers/webhookReceiver.ts'

// The CLI runs as child processes (a few seconds each); plain `node` runs would stop at tap's default 30 s.
t.setTimeout(180_000)

const dayMs = 86_400_000
const settle = (ms: number) => new Promise((done) => setTimeout(done, ms))

async function createWebhook(service: Service, receiver: Receiver, events: string[]) {
  const created = await service.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: events }, today: true })
  if (created.status !== 200) throw new Error(created.text)
  return created.json as { Id: number; Secret: string }
}

t.test('key.usage from credits: 80 % and 100 % of a Refill Amount, or of the count as last set without one', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    const groups = await keyTestGroups(service)
    await createWebhook(service, receiver, ['key.usage'])
    const create = async (name: string, body: Record<string, unknown>) => {
      const created = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: name, GroupId: [groups.aclReader], Require_Https: 0, ...body }, today: true })
      t.equal(created.status, 200, created.text)
      return { id: created.json.Id as number, apiKey: created.json.Api_Key as string, secret: created.json.Api_Secret as string }
    }
    const refilled = await create('Refilled', { Credits: 10, Refill: { Amount: 10, Every: '1Day' } })
    const statuses = []
    for (let call = 0; call < 11; call++) statuses.push((await service.call('GET', '/Api/Read/Acl', { key: refilled })).status)
    t.same(statuses, [...Array(10).fill(200), 429], 'ten credits, then none')
    const fromRefill = await receiver.waitFor(2, (item) => item.json.data.KeyId === refilled.id)
    t.same(fromRefill.map((item) => item.json.data.Percent).sort(), [100, 80])
    // Left as at the crossing (10 - 8), whatever later calls spent before the event was written.
    t.match(fromRefill.find((item) => item.json.data.Percent === 80)!.json.data, { Limit: 'Credits', Count: 10, Left: 2, Name: 'Refilled', ResetDate: /GMT$/ })
    t.match(fromRefill.find((item) => item.json.data.Percent === 100)!.json.data, { Limit: 'Credits', Left: 0 })

    // Spent in parallel: the count read back after the crossing is lower, the event says what the crossing left.
    const parallel = await create('Parallel', { Credits: 10, Refill: { Amount: 10, Every: '1Day' } })
    await Promise.all(Array.from({ length: 12 }, () => service.call('GET', '/Api/Read/Acl', { key: parallel })))
    const fromParallel = await receiver.waitFor(2, (item) => item.json.data.KeyId === parallel.id)
    t.same(fromParallel.map((item) => [item.json.data.Percent, item.json.data.Left]).sort(), [[100, 0], [80, 2]])

    // Without a Refill: 80 % and 100 % of the count as set, once each per setting.
    const ten = await create('Ten', { Credits: 10 })
    const spend = async (calls: number) => {
      for (let call = 0; call < calls; call++) t.equal((await service.call('GET', '/Api/Read/Acl', { key: ten })).status, 200)
    }
    const fromTen = () => receiver.received.filter((item) => item.json.data.KeyId === ten.id).map((item) => item.json.data)
    await spend(7)
    await settle(300)
    t.same(fromTen(), [], 'nothing before 80 %')
    await spend(1)
    await receiver.waitFor(1, (item) => item.json.data.KeyId === ten.id)
    t.match(fromTen()[0], { Limit: 'Credits', Percent: 80, Count: 10, Left: 2, Name: 'Ten', ResetDate: null })
    // A change that does not set the count is no new setting: 80 % is not told again.
    t.equal((await service.call('POST', '/Api/Edit/Key', { body: { KeyId: ten.id, Email: 'ten@example.com' }, today: true })).status, 200)
    await spend(2)
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: ten })).status, 429, 'ten credits, then none')
    await receiver.waitFor(2, (item) => item.json.data.KeyId === ten.id)
    t.match(fromTen()[1], { Limit: 'Credits', Percent: 100, Count: 10, Left: 0, ResetDate: null })
    // AddCredits sets the count anew, to the total: 80 % of 5 is 4 calls.
    t.equal((await service.call('POST', '/Api/Edit/Key', { body: { KeyId: ten.id, AddCredits: 5 }, today: true })).status, 200)
    await spend(4)
    await receiver.waitFor(3, (item) => item.json.data.KeyId === ten.id)
    t.match(fromTen()[2], { Limit: 'Credits', Percent: 80, Count: 5, Left: 1 })

    // 80 % of 3 rounds up to the whole count: running out tells both.
    const once = await create('Once', { Credits: 3 })
    for (let call = 0; call < 4; call++) await service.call('GET', '/Api/Read/Acl', { key: once })
    const ranOut = await receiver.waitFor(2, (item) => item.json.data.KeyId === once.id)
    t.same(ranOut.map((item) => item.json.data.Percent).sort(), [100, 80])
    t.match(ranOut.find((item) => item.json.data.Percent === 100)!.json.data, { Limit: 'Credits', Left: 0, Count: 3, ResetDate: null })
    // Topped up and spent again: a new setting of the count, so both are told again.
    t.equal((await service.call('POST', '/Api/Edit/Key', { body: { KeyId: once.id, Credits: 1 }, today: true })).status, 200)
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: once })).status, 200)
    await receiver.waitFor(4, (item) => item.json.data.KeyId === once.id)

    await settle(400)
    t.equal(receiver.received.filter((item) => item.json.data.KeyId === refilled.id).length, 2, 'the refilled key: once per threshold')
    t.same(fromTen().map((data) => data.Percent), [80, 100, 80], 'without a Refill: once per threshold and setting')
    t.equal(receiver.received.filter((item) => item.json.data.KeyId === once.id).length, 4, 'both, once per setting')
  }))

t.test('key.usage from credits of a key from before the count as set was kept: 80 % of the count it had', (t) =>
  forEachDatabase(t, async (t, kind) => {
    let service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    await createWebhook(service, receiver, ['key.usage'])
    const key = await insertKey(service, { display_name: 'Upgraded', credits: 10 }, [(await keyTestGroups(service)).aclReader])
    for (let call = 0; call < 5; call++) t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200)
    // The database as version 0.3.7 left it: no count as set.
    const { db } = service.kernel.database
    for (const column of ['credits_set', 'credits_set_at']) await db.schema.alterTable('api_keys').dropColumn(column).execute()
    await sql`delete from migrations_kernel where name = ${'0012-credits-set'}`.execute(db)
    service = await service.restart()
    const row = await service.kernel.database.db.selectFrom('api_keys').select(['credits', 'credits_set', 'credits_set_at', 'updated_at']).where('id', '=', key.id).executeTakeFirstOrThrow()
    t.same([Number(row.credits_set), Number(row.credits_set_at)], [5, Number(row.updated_at)], 'set: the count it had, when it last changed')
    // 80 % of 5 is 4 calls.
    for (let call = 0; call < 3; call++) t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200)
    await settle(300)
    t.equal(receiver.received.length, 0, 'nothing before 80 %')
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200)
    const [told] = await receiver.waitFor(1)
    t.match(told.json.data, { KeyId: key.id, Limit: 'Credits', Percent: 80, Count: 5, Left: 1 })
  }))

t.test('key.usage from a tenant quota: 80 % and 100 %, once per window', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    // The parent-wide webhook (the admin key is Parent 1, Custno 0) hears its customers' tenants.
    await createWebhook(service, receiver, ['key.usage'])
    await setEntitlement(service, 1, 5, { MaxHits: '5/1Hour' })
    const [a, b] = [await insertKey(service, { parent: 1, custno: 5 }), await insertKey(service, { parent: 1, custno: 5 })]
    const statuses = []
    for (const key of [a, b, a, b, a, b, a]) statuses.push((await service.call('GET', '/Api/Read/Acl', { key })).status)
    t.same(statuses, [200, 200, 200, 200, 200, 429, 429])
    const told = await receiver.waitFor(2)
    t.same(told.map((item) => item.json.data.Percent).sort(), [100, 80])
    t.match(told.find((item) => item.json.data.Percent === 80)!.json.data, { Limit: 'Tenant', Window: '1Hour', Count: 5, Used: 4, KeyId: b.id, Tenant: { Parent: 1, Custno: 5 } })
    t.match(told.find((item) => item.json.data.Percent === 100)!.json.data, { Limit: 'Tenant', Used: 5, KeyId: a.id, ResetDate: /GMT$/ })
    await settle(400)
    t.equal(receiver.received.length, 2, 'refused calls tell nothing more')
  }))

t.test('key.usage of a small MaxHits: one call crossing 80 % and 100 % tells both, 80 % first', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    await createWebhook(service, receiver, ['key.usage'])
    // 80 % of 4 is 3.2 calls: the fourth call reaches both.
    const key = await insertKey(service, { display_name: 'Small', max_hits: '4/1Min' })
    for (let call = 0; call < 4; call++) t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200)
    const told = await receiver.waitFor(2)
    t.same(told.map((item) => item.json.data.Percent).sort(), [100, 80])
    t.match(told.find((item) => item.json.data.Percent === 80)!.json.data, { Limit: 'MaxHits', Count: 4, Used: 4 })
    // Written in that order (deliveries may arrive in any order).
    const written = await service.kernel.database.db.selectFrom('webhook_events' as never).select('payload' as never).orderBy('id' as never).execute()
    t.same(written.map((row) => JSON.parse(String(row.payload)).data.Percent), [80, 100], '80 % first')
    await settle(300)
    t.equal(receiver.received.length, 2, 'each once')
  }))

t.test('key.usage whose write failed is written by a later call past the threshold', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    await createWebhook(service, receiver, ['key.usage'])
    const db = service.kernel.database.db
    // The database refuses every event row while the trigger exists.
    await sql.raw(kind === 'mysql'
      ? "CREATE TRIGGER refuse_events BEFORE INSERT ON webhook_events FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'"
      : "CREATE TRIGGER refuse_events BEFORE INSERT ON webhook_events BEGIN SELECT RAISE(ABORT, 'refused'); END").execute(db)
    const key = await insertKey(service, { display_name: 'Lossy', max_hits: '10/1Hour' })
    // The eighth call crosses 80 %: its write fails.
    for (let call = 0; call < 8; call++) t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200)
    await settle(300)
    await sql.raw('DROP TRIGGER refuse_events').execute(db)
    t.equal(receiver.received.length, 0, 'nothing written while refused')
    // A failed write quiets the writes for a second; then the next call writes the crossing.
    await settle(1100)
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200)
    const [told] = await receiver.waitFor(1)
    t.match(told.json.data, { KeyId: key.id, Limit: 'MaxHits', Count: 10, Percent: 80, Used: 9 })
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200)
    await receiver.waitFor(2)
    await settle(300)
    t.same(receiver.received.map((item) => item.json.data.Percent), [80, 100], 'each once')
  }))

t.test('key.usage with a shared counter: only the process whose call reached a threshold tells it', async (t) => {
  // Two processes share one Redis counter of 5/1Min. Process A's call made the count 4
  // (80 %), B's made it 5 (100 %). Each works out the window's start from its own clock
  // and the counter's time left: 2 ms apart, here across a half second, they round it to
  // neighbouring seconds, so B writing 80 % too would be a second event (another once
  // key) for one crossing.
  const window = { count: 5, seconds: 60, label: '1Min' }
  const caller = { id: 7, parent: 1, custno: 0, displayName: 'Shared' } as unknown as CallerKey
  const written: KernelEvent[] = []
  const bus = { emitAlone: async (event: KernelEvent) => { written.push(event); return 'kept' as const } } as unknown as EventBus
  const db = null as unknown as Service['kernel']['database']['db']
  const a = new UsageEvents(db, bus, () => 1_000_000_000)
  const b = new UsageEvents(db, bus, () => 1_000_000_600)
  a.counted(caller, window, null, 4, 40_499)
  b.counted(caller, window, null, 5, 39_901)
  b.counted(caller, window, null, 6, 39_800)
  await settle(50)
  t.same(written.map((event) => event.data.Percent), [80, 100], 'one event per threshold')
  t.same(written.map((event) => event.once!.split(':').at(-2)), ['999980', '999981'], 'the two processes rounded the start apart')

  // A write that failed is tried again by that process's next call past the threshold.
  const outcomes = ['failed', 'kept', 'kept']
  const retried: KernelEvent[] = []
  let now = 2_000_000_000
  const lossy = new UsageEvents(db, { emitAlone: async (event: KernelEvent) => { retried.push(event); return outcomes.shift() } } as unknown as EventBus, () => now)
  lossy.counted(caller, window, null, 4, 50_000)
  await settle(20)
  now += 1500
  lossy.counted(caller, window, null, 5, 48_500)
  await settle(20)
  t.same(retried.map((event) => [event.data.Percent, event.data.Used]), [[80, 4], [80, 5], [100, 5]])
})

t.test('key.expiring at 7 days and at 1 day, once each, across scans and a restart', (t) =>
  forEachDatabase(t, async (t, kind) => {
    let offset = 0
    const clock = () => Date.now() + offset
    const service = await startService(t, { kind, config: fastWebhooks, clock })
    const receiver = await startReceiver(t)
    await createWebhook(service, receiver, ['key.expiring'])
    const endDate = Date.now() + 6 * dayMs
    const key = await insertKey(service, { display_name: 'Ending', end_date: endDate })
    const [week] = await receiver.waitFor(1)
    t.match(week.json.data, { KeyId: key.id, Name: 'Ending', Days: 7, EndDate: new Date(endDate).toUTCString() })
    // Several scans (every 100 ms) and a restart (which forgets what it told): still one.
    await settle(400)
    const second = await service.restart()
    await settle(400)
    t.equal(receiver.received.length, 1, 'the 7-day warning once')

    // Five and a half days later the key ends within a day.
    offset = 5.5 * dayMs
    const [, day] = await receiver.waitFor(2)
    t.match(day.json.data, { KeyId: key.id, Days: 1, EndDate: new Date(endDate).toUTCString() })
    await settle(400)
    // Stopped, then started through the first handle: the helper's teardown stops what that one started last.
    await second.stop()
    await service.restart()
    await settle(400)
    t.same(receiver.received.map((item) => item.json.data.Days), [7, 1], 'each warning once')
    t.equal(new Set(receiver.received.map((item) => item.id)).size, 2)
  }))

t.test('key.expiring noticed while no webhook wanted it: a webhook made later hears it at the next scan, once', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    const endDate = Date.now() + 3 * dayMs
    const key = await insertKey(service, { display_name: 'Unheard', end_date: endDate })
    // Several scans (every 100 ms) with nobody subscribed.
    await settle(400)
    await createWebhook(service, receiver, ['key.expiring'])
    const [warning] = await receiver.waitFor(1)
    t.match(warning.json.data, { KeyId: key.id, Days: 7 })
    await settle(400)
    t.equal(receiver.received.length, 1, 'once')
  }))

t.test("the operator CLI's key disable and enable: key.disabled and key.changed", (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    await createWebhook(service, receiver, ['key.disabled', 'key.changed'])
    const key = await insertKey(service, { display_name: 'Operated' })
    const disabled = await admin(service, 'key', 'disable', String(key.id), '--json')
    t.equal(disabled.code, 0, disabled.stderr)
    const [first] = await receiver.waitFor(1)
    t.match(first.json, { type: 'key.disabled', data: { KeyId: key.id, Name: 'Operated', Parent: 1, Custno: 0, EndDate: /GMT$/ } })
    const enabled = await admin(service, 'key', 'enable', String(key.id), '--json')
    t.equal(enabled.code, 0, enabled.stderr)
    const [, second] = await receiver.waitFor(2)
    t.match(second.json, { type: 'key.changed', data: { KeyId: key.id, Changed: ['EndDate'] } })
    await settle(300)
    t.equal(receiver.received.length, 2, 'each once')
    const audit = await service.kernel.database.db.selectFrom('api_audit').select('action').where('key_id', '=', key.id).orderBy('id').execute()
    t.same(audit.map((row) => row.action).filter((action) => action !== 'key.create'), ['key.disable', 'key.enable'], 'audited as before')
  }))

t.test('webhooks.maxPerTenant: a create beyond it is 403, nothing written', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: { ...fastWebhooks, webhooks: { ...fastWebhooks.webhooks!, maxPerTenant: 2 } } })
    const receiver = await startReceiver(t)
    const count = async (running = service) => Number((await running.kernel.database.db.selectFrom('webhooks' as never).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n)
    const create = () => service.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: ['key.changed'] }, today: true })
    const first = await create()
    t.equal(first.status, 200)
    t.equal((await create()).status, 200)
    // Disabled ones count too: an edit reuses one.
    t.equal((await service.call('POST', '/Api/Edit/Webhook', { body: { Id: first.json.Id, Disabled: 1 }, today: true })).status, 200)
    const refused = await create()
    t.equal(refused.status, 403)
    t.equal(refused.text, 'Error: Webhook limit reached: a tenant has at most 2 webhooks (webhooks.maxPerTenant); edit a disabled one to reuse it.')
    t.equal(await count(), 2, 'nothing written')
    // Concurrent creates never pass the cap either.
    const service2 = await service.restart({ webhooks: { ...fastWebhooks.webhooks!, maxPerTenant: 6 } })
    const answers = await Promise.all(Array.from({ length: 8 }, () => service2.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: ['key.changed'] }, today: true })))
    t.same(answers.map((answer) => answer.status).sort(), [200, 200, 200, 200, 403, 403, 403, 403])
    t.equal(await count(service2), 6)
  }))
