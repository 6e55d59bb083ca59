/**
 * Issue 17: webhooks. A receiver on a loopback port (allowed by config) gets each event
 * type once, signed so that the `standardwebhooks` library verifies it; the routes'
 * inputs, day code, authority and tenant isolation. On SQLite and MariaDB.
 */
import t from 'tap'
import { Webhook } from 'standardwebhooks'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { groupNamed, insertKey, keyTestGroups, tenantKey } from './helpers/keys.ts'
import { fastWebhooks, startReceiver, type Receiver } from './helpers/webhookReceiver.ts'

const allEvents = ['key.expiring', 'key.usage', 'key.changed', 'key.rotated', 'key.disabled', 'people.import.finished']

async function createWebhook(service: Service, receiver: Receiver, events = allEvents) {
  const created = await service.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: events }, today: true })
  if (created.status !== 200) throw new Error(created.text)
  return created.json as { Id: number; Url: string; Events: string[]; Secret: string }
}

t.test('each event arrives once, verified with standardwebhooks', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    const groups = await keyTestGroups(service)
    const webhook = await createWebhook(service, receiver)
    t.match(webhook, { Id: Number, Url: receiver.url, Events: allEvents, Secret: /^whsec_[A-Za-z0-9+/]{32}$/ })

    // A key that ends in three days: key.expiring (7 days) from the scan, once.
    const endDate = new Date(Date.now() + 3 * 86_400_000).toUTCString()
    const created = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Watched', GroupId: [groups.aclReader], Require_Https: 0, MaxHits: '5/1Hour', EndDate: endDate }, today: true })
    t.equal(created.status, 200, created.text)
    const key = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
    const keyId = created.json.Id

    t.equal((await service.call('POST', '/Api/Edit/Key', { body: { KeyId: keyId, Email: 'ops@example.com' }, today: true })).status, 200)
    const rotation = await service.call('POST', '/Api/Rotate/Key', { body: { KeyId: keyId, OldSecretValidFor: 0 }, today: true })
    t.equal(rotation.status, 200)
    // Five calls of 5/1Hour: 80 % at the fourth, 100 % at the fifth; the sixth (refused) tells nothing more.
    const rotated = { apiKey: key.apiKey, secret: rotation.json.Api_Secret }
    for (let call = 0; call < 6; call++) await service.call('GET', '/Api/Read/Acl', { key: rotated })
    await receiver.waitFor(2, (item) => item.json.type === 'key.usage')
    // The scan's warning comes on its own clock (every 100 ms here), so wait for it before the
    // edit below ends the key and leaves nothing to warn of. A scan that never tells still
    // fails here, after 10 s, naming what did arrive.
    await receiver.waitFor(1, (item) => item.json.type === 'key.expiring')

    const importId = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, People: [{ Source_Id: 'E1', FirstName: 'Ada', LastName: 'Lovelace' }] } })
    t.equal((await service.call('POST', '/people/update/importterm', { body: { ImportId: importId } })).status, 200)

    t.equal((await service.call('POST', '/Api/Edit/Key', { body: { KeyId: keyId, EndDate: new Date().toUTCString(), Display_Name: 'Watched, ended' }, today: true })).status, 200)

    await receiver.waitFor(7)
    // A moment more, so a duplicate would have arrived.
    await new Promise((done) => setTimeout(done, 400))
    const types = receiver.received.map((item) => item.json.type).sort()
    t.same(types, ['key.changed', 'key.disabled', 'key.expiring', 'key.rotated', 'key.usage', 'key.usage', 'people.import.finished'], 'each event once')
    const verifier = new Webhook(webhook.Secret)
    for (const item of receiver.received) {
      const verified = verifier.verify(item.body, { 'webhook-id': item.id, 'webhook-timestamp': item.timestamp, 'webhook-signature': item.signature }) as { type: string }
      t.equal(verified.type, item.json.type, `${item.json.type} verifies`)
    }
    t.equal(new Set(receiver.received.map((item) => item.id)).size, 7, 'one webhook-id each')
    const byType = (type: string) => receiver.received.filter((item) => item.json.type === type).map((item) => item.json.data)
    t.match(byType('key.expiring')[0], { KeyId: keyId, Name: 'Watched', Days: 7, EndDate: endDate })
    t.match(byType('key.changed')[0], { KeyId: keyId, Changed: ['Email'] })
    t.match(byType('key.rotated')[0], { KeyId: keyId })
    t.same(byType('key.usage').map((data) => data.Percent).sort(), [100, 80])
    t.match(byType('key.usage')[0], { KeyId: keyId, Limit: 'MaxHits', Window: '1Hour', Count: 5 })
    t.match(byType('people.import.finished')[0], { Parent: Number, Custno: Number, ImportId: importId, Added: 1 })
    t.match(byType('key.disabled')[0], { KeyId: keyId, Name: 'Watched, ended' }, 'the name after the edit')
    t.match(receiver.received[0].json, { type: String, timestamp: /^\d{4}-\d\d-\d\dT/, data: Object })

    // The deliveries, as the tenant reads them.
    const deliveries = await service.call('POST', '/Api/Read/Deliveries', { body: { WebhookId: webhook.Id, Status: 'delivered' } })
    t.equal(deliveries.status, 200, deliveries.text)
    t.equal(deliveries.json.Total, 7)
    t.same(new Set(deliveries.json.Deliveries.map((delivery: { Id: string }) => delivery.Id)), new Set(receiver.received.map((item) => item.id)), 'Id = webhook-id')
    t.match(deliveries.json.Deliveries[0], { WebhookId: webhook.Id, Status: 'delivered', Attempts: 1, LastStatus: 200, LastError: null, NextAttempt: null, Created: String, Delivered: String })
    const usage = await service.call('POST', '/Api/Read/Deliveries', { body: { Event: 'key.usage', PageSize: 1, Page: 2 } })
    t.match(usage.json, { Total: 2, Page: 2 })
    t.equal(usage.json.Deliveries.length, 1)
    // To is inclusive: a delivery's own Created (whole seconds) finds it, and a date alone its whole day.
    const newest = deliveries.json.Deliveries[0] as { Id: string; Created: string }
    const sameSecond = await service.call('POST', '/Api/Read/Deliveries', { body: { From: newest.Created, To: newest.Created } })
    t.ok(sameSecond.json.Deliveries.some((delivery: { Id: string }) => delivery.Id === newest.Id), 'To = its Created finds it')
    const day = new Date(newest.Created).toISOString().slice(0, 10)
    const byDay = await service.call('POST', '/Api/Read/Deliveries', { body: { From: day, To: day } })
    t.ok(byDay.json.Deliveries.some((delivery: { Id: string }) => delivery.Id === newest.Id), 'To = its day finds it')
    const reversed = await service.call('POST', '/Api/Read/Deliveries', { body: { From: '2026-11-02', To: '2026-11-01' } })
    t.equal(reversed.text, 'Error: From must not be later than To.')
    // The spelling of the other paged reads (Audit, History) works too, one per call.
    const lower = await service.call('POST', '/Api/Read/Deliveries', { body: { Event: 'key.usage', size: 1, page: 2, from: day, to: day } })
    t.equal(lower.status, 200, lower.text)
    t.match(lower.json, { Total: 2, Page: 2 })
    t.same(lower.json.Deliveries, usage.json.Deliveries, 'page, size, from and to as Page, PageSize, From and To')
    const both = await service.call('POST', '/Api/Read/Deliveries', { body: { Page: 1, page: 1 } })
    t.same([both.status, both.text], [400, 'Error: Give Page or page, not both.'])
    const bothDates = await service.call('POST', '/Api/Read/Deliveries', { body: { To: day, to: day } })
    t.same([bothDates.status, bothDates.text], [400, 'Error: Give To or to, not both.'])
    const csv = await service.call('POST', '/Api/Read/Deliveries?format=csv', { body: {} })
    t.equal(csv.headers.get('x-total-count'), '7')
    t.match(csv.text, /^Id,WebhookId,Event,Status,Attempts,LastStatus,LastError,NextAttempt,Created,Delivered/)
  }))

t.test('inputs, day code, authority, tenants', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    const count = async () => Number((await service.kernel.database.db.selectFrom('webhooks' as never).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n)
    const create = (body: unknown, options: { today?: boolean } = { today: true }) => service.call('POST', '/Api/Create/Webhook', { body, ...options })

    const noDayCode = await create({ Url: receiver.url, Events: ['key.changed'] }, {})
    t.equal(noDayCode.status, 401, 'create needs the day code')
    const bad: [unknown, RegExp][] = [
      [{ Events: ['key.changed'] }, /Url/],
      [{ Url: receiver.url }, /Events/],
      [{ Url: receiver.url, Events: [] }, /Events/],
      [{ Url: receiver.url, Events: ['key.exploded'] }, /Events/],
      [{ Url: receiver.url, Events: ['key.changed', 'key.changed'] }, /^Error: Events: 'key\.changed' is given twice\.$/],
      // The string form like the array form: each type once (it used to drop the repeat silently).
      [{ Url: receiver.url, Events: 'key.changed, key.rotated,key.changed' }, /^Error: Events: 'key\.changed' is given twice\.$/],
      [{ Url: receiver.url, Events: '' }, /Events/],
      [{ Url: receiver.url, Events: 'key.changed,key.exploded' }, /^Error: Events: 'key.exploded' is not an event type \(key.expiring, /],
      [{ Url: receiver.url, Events: 'key.changed,' }, /^Error: Events: '' is not an event type/],
      [{ Url: receiver.url, Events: 7 }, /Events/],
      [{ Url: receiver.url, Events: ['key.changed'], Extra: 1 }, /Extra/],
      [{ Url: 'not a url', Events: ['key.changed'] }, /^Error: Url must be an absolute URL/],
      [{ Url: 'http://127.0.0.1:99999/hook', Events: ['key.changed'] }, /^Error: Url has a host or port that cannot be read \(a port is 1-65535; an IPv6 address takes no zone id\)\.$/],
      [{ Url: 'http://[fe80::1%25eth0]/hook', Events: ['key.changed'] }, /^Error: Url has a host or port that cannot be read/],
      // Stored as sent but called without them (the URL parser drops them): refused.
      [{ Url: ` ${receiver.url}`, Events: ['key.changed'] }, /^Error: Url must not have spaces at either end, tabs or line breaks\.$/],
      [{ Url: `${receiver.url}\t`, Events: ['key.changed'] }, /^Error: Url must not have spaces/],
      [{ Url: receiver.url.replace('/hook', '/ho\nok'), Events: ['key.changed'] }, /^Error: Url must not have spaces/],
      [{ Url: 'ftp://127.0.0.1/x', Events: ['key.changed'] }, /^Error: Url must start with https:\/\/ or http:\/\//],
      [{ Url: 'http://user:pw@127.0.0.1/x', Events: ['key.changed'] }, /user name or password/],
      [{ Url: receiver.url, Events: ['key.changed'], Secret: 'plain' }, /^Error: Secret must be whsec_/],
      [{ Url: receiver.url, Events: ['key.changed'], Secret: 'whsec_c2hvcnQ=' }, /^Error: Secret must be whsec_/],
      [{ Url: 'http://10.0.0.1/hook', Events: ['key.changed'] }, /^Error: The host 10\.0\.0\.1 resolves to 10\.0\.0\.1, a private/],
      [{ Url: 'http://[::1]:9/hook', Events: ['key.changed'] }, /private, loopback or link-local/],
      [{ Url: 'http://[::ffff:127.0.0.2]:9/hook', Events: ['key.changed'] }, /private, loopback or link-local/],
      [{ Url: 'http://169.254.169.254/latest', Events: ['key.changed'] }, /private, loopback or link-local/],
      // The forms that embed an IPv4 address: local-use NAT64, Teredo, IPv4-compatible.
      ...['[64:ff9b:1::a00:1]', '[2001:0:4136:e378:8000:63bf:3fff:fdd2]', '[::a00:1]']
        .map((host): [Record<string, unknown>, RegExp] => [{ Url: `http://${host}/hook`, Events: ['key.changed'] }, /private, loopback or link-local/]),
    ]
    for (const [body, message] of bad) {
      const answer = await create(body)
      t.equal(answer.status, 400, JSON.stringify(body))
      t.match(answer.text, message)
      t.match(answer.text, /^Error: /)
    }
    t.equal(await count(), 0, 'nothing written')

    const secret = 'whsec_' + Buffer.alloc(32, 7).toString('base64')
    const made = await create({ Url: receiver.url, Events: ['key.changed'], Secret: secret })
    t.equal(made.status, 200, made.text)
    t.equal(made.json.Secret, secret, 'a given secret is used')

    const listed = await service.call('GET', '/Api/Read/Webhooks')
    t.same(listed.json, [{ Id: made.json.Id, Url: receiver.url, Events: ['key.changed'], Disabled: 0, Parent: 1, Custno: 0, Created: listed.json[0].Created }])
    // Events as one comma-separated string, as GroupId may be (D9).
    const asText = await create({ Url: receiver.url, Events: 'key.rotated, key.disabled' })
    t.equal(asText.status, 200, asText.text)
    t.same(asText.json.Events, ['key.rotated', 'key.disabled'], 'split and trimmed')
    const editedAsText = await service.call('POST', '/Api/Edit/Webhook', { today: true, body: { Id: asText.json.Id, Events: 'key.usage' } })
    t.equal(editedAsText.status, 200, editedAsText.text)
    t.same(editedAsText.json.Events, ['key.usage'])
    t.equal((await service.call('POST', '/Api/Edit/Webhook', { today: true, body: { Id: asText.json.Id } })).status, 400)
    t.equal((await service.call('POST', '/Api/Edit/Webhook', { today: true, body: { Id: asText.json.Id, Events: 'key.nothing' } })).status, 400)
    t.notMatch(listed.text, /whsec_/, 'never the secret')

    // Edit: day code, changes, 400 and 404.
    const edit = (body: unknown, today = true) => service.call('POST', '/Api/Edit/Webhook', { body, today })
    t.equal((await edit({ Id: made.json.Id, Disabled: 1 }, false)).status, 401, 'edit needs the day code')
    t.equal((await edit({ Id: made.json.Id })).status, 400, 'nothing to change')
    t.equal((await edit({ Id: made.json.Id, Url: 'http://10.1.2.3/' })).status, 400)
    t.equal((await edit({ Id: made.json.Id, Url: `${receiver.url} ` })).status, 400, 'a Url with a space at its end')
    t.equal((await edit({ Id: made.json.Id, Disabled: 2 })).status, 400)
    t.equal((await edit({ Id: 999_999, Disabled: 1 })).status, 404)
    const edited = await edit({ Id: made.json.Id, Events: ['key.rotated', 'key.changed'], Disabled: 1 })
    t.equal(edited.status, 200, edited.text)
    t.match(edited.json, { Id: made.json.Id, Events: ['key.rotated', 'key.changed'], Disabled: 1 })
    t.notOk('Secret' in edited.json, 'no secret unless one was given')
    const unchanged = await service.call('GET', '/Api/Read/Webhooks')
    t.match(unchanged.json[0], { Url: receiver.url, Disabled: 1 })

    // Another tenant sees none of it, and gets the same 404 as for an unknown id.
    const other = await tenantKey(service, 2, 0)
    const otherList = await service.call('GET', '/Api/Read/Webhooks', { key: other })
    t.same(otherList.json, [], "another tenant's webhooks are invisible")
    const otherEdit = await service.call('POST', '/Api/Edit/Webhook', { key: other, body: { Id: made.json.Id, Disabled: 0 }, today: true })
    t.equal(otherEdit.status, 404)
    t.equal(otherEdit.text, 'Error: Webhook not found.')
    const otherDeliveries = await service.call('POST', '/Api/Read/Deliveries', { key: other, body: { WebhookId: made.json.Id } })
    t.same(otherDeliveries.json, { Total: 0, Page: 1, Deliveries: [] })

    // A key that may not create keys manages no webhooks, even holding the paths.
    const webhookGroup = await groupNamed(service, 'Webhook administration')
    const plain = await insertKey(service, {}, [webhookGroup])
    const refused = await service.call('GET', '/Api/Read/Webhooks', { key: plain })
    t.equal(refused.status, 403)
    t.match(refused.text, /^Error: Only a key that may create keys/)
    const refusedCreate = await service.call('POST', '/Api/Create/Webhook', { key: plain, body: { Url: 'x', Events: 'nope' }, today: true })
    t.equal(refusedCreate.status, 403, 'refused for who it is before its body is judged')
    t.match(refusedCreate.text, /^Error: Only a key that may create keys/)
    // Before the body's schema too: a body that breaks it, and Deliveries' From.
    for (const [path, body] of [['/Api/Create/Webhook', { Url: 'x' }], ['/Api/Edit/Webhook', { Id: 0, Extra: 1 }], ['/Api/Read/Deliveries', { From: 'yesterday' }]] as const) {
      const answer = await service.call('POST', path, { key: plain, body, today: true })
      t.equal(answer.status, 403, `${path}: 403 before the schema`)
      t.match(answer.text, /^Error: Only a key that may create keys/)
    }
    t.equal((await service.call('POST', '/Api/Read/Deliveries', { body: { From: 'yesterday' } })).status, 400)
    t.equal((await service.call('POST', '/Api/Read/Deliveries', { body: { PageSize: 1001 } })).status, 400)
    t.equal((await service.call('POST', '/Api/Read/Deliveries', { body: { Status: 'lost' } })).status, 400)
  }))

t.test('localhost is refused at create unless allowed, and at delivery when the allow list changes', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const receiver = await startReceiver(t)
    const localUrl = `http://localhost:${receiver.port}/hook`
    const closed = await startService(t, { kind, config: { ...fastWebhooks, webhooks: { ...fastWebhooks.webhooks!, allowAddresses: [] } } })
    const refused = await closed.call('POST', '/Api/Create/Webhook', { body: { Url: localUrl, Events: ['key.changed'] }, today: true })
    t.equal(refused.status, 400)
    t.match(refused.text, /^Error: The host localhost resolves to (127\.0\.0\.1|::1), a private, loopback or link-local address/)
    await closed.stop()

    const service = await startService(t, { kind, config: { ...fastWebhooks, webhooks: { ...fastWebhooks.webhooks!, allowAddresses: ['127.0.0.1', '::1'] } } })
    const groups = await keyTestGroups(service)
    const created = await service.call('POST', '/Api/Create/Webhook', { body: { Url: localUrl, Events: ['key.changed'] }, today: true })
    t.equal(created.status, 200, created.text)
    const key = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Moved', GroupId: [groups.aclReader], Require_Https: 0 }, today: true })
    // The operator closes loopback again before the change's delivery goes out.
    const reopened = await service.restart({ webhooks: { ...fastWebhooks.webhooks!, allowAddresses: [] } })
    t.equal((await reopened.call('POST', '/Api/Edit/Key', { body: { KeyId: key.json.Id, Phone: '1' }, today: true })).status, 200)
    let delivery: Record<string, unknown> | undefined
    for (let wait = 0; wait < 100 && !delivery; wait++) {
      await new Promise((done) => setTimeout(done, 50))
      delivery = (await reopened.call('POST', '/Api/Read/Deliveries', { body: {} })).json.Deliveries.find((item: { Attempts: number }) => item.Attempts >= 1)
    }
    t.match(delivery, { Status: 'pending', LastStatus: null, LastError: /^The host localhost resolves to .*a private, loopback or link-local address/ })
    t.equal(receiver.attempts, 0, 'never sent')
  }))

t.test('an http:// webhook is not delivered once allowHttp is turned off', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const receiver = await startReceiver(t)
    const service = await startService(t, { kind, config: fastWebhooks })
    const groups = await keyTestGroups(service)
    t.equal((await service.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: ['key.changed'] }, today: true })).status, 200)
    const key = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Plain', GroupId: [groups.aclReader], Require_Https: 0 }, today: true })
    const closed = await service.restart({ webhooks: { ...fastWebhooks.webhooks!, allowHttp: false } })
    t.equal((await closed.call('POST', '/Api/Edit/Key', { body: { KeyId: key.json.Id, Phone: '1' }, today: true })).status, 200)
    let delivery: Record<string, unknown> | undefined
    for (let wait = 0; wait < 100 && !delivery; wait++) {
      await new Promise((done) => setTimeout(done, 50))
      delivery = (await closed.call('POST', '/Api/Read/Deliveries', { body: {} })).json.Deliveries.find((item: { Attempts: number }) => item.Attempts >= 1)
    }
    t.match(delivery, { Status: 'pending', LastStatus: null, LastError: 'Url must start with https://.' })
    t.equal(receiver.attempts, 0, 'never sent over plain http')
  }))

t.test('webhook create and edit leave one audit record each, never the secret', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    const created = await service.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: ['key.changed'] }, today: true })
    t.equal(created.status, 200, created.text)
    const newSecret = 'whsec_' + Buffer.alloc(32, 9).toString('base64')
    const edited = await service.call('POST', '/Api/Edit/Webhook', { body: { Id: created.json.Id, Events: 'key.changed, key.rotated', Secret: newSecret }, today: true })
    t.equal(edited.status, 200, edited.text)
    const disabled = await service.call('POST', '/Api/Edit/Webhook', { body: { Id: created.json.Id, Disabled: 1 }, today: true })
    t.equal((await service.call('POST', '/Api/Edit/Webhook', { body: { Id: created.json.Id, Url: 'ftp://x' }, today: true })).status, 400)
    const again = await service.call('POST', '/Api/Edit/Webhook', { body: { Id: created.json.Id, Disabled: 1, Url: receiver.url }, today: true })
    t.equal(again.status, 200, 'an edit that changes nothing is accepted')
    const audit = await service.call('POST', '/Api/Read/Audit', { body: {} })
    t.equal(audit.status, 200, audit.text)
    const [disabling, editing, creation] = audit.json.Records
    t.equal(audit.json.Total, 3, 'a refused edit and one that changes nothing record nothing')
    t.match(creation, { Who: service.admin.id, Action: 'webhook.create', KeyId: null, Before: null, After: { Id: created.json.Id, Url: receiver.url, Events: ['key.changed'], Disabled: 0 }, RequestId: Number(created.headers.get('x-requestid')) })
    t.match(editing, { Action: 'webhook.edit', Before: { Id: created.json.Id, Events: ['key.changed'] }, After: { Id: created.json.Id, Events: ['key.changed', 'key.rotated'], SecretReplaced: 1 } })
    t.match(disabling, { Action: 'webhook.disable', Before: { Disabled: 0 }, After: { Disabled: 1 }, RequestId: Number(disabled.headers.get('x-requestid')) })
    const text = JSON.stringify(audit.json)
    t.notOk(text.includes(created.json.Secret) || text.includes(newSecret), 'no secret in the trail')
  }))
