/**
 * Issue 17: deliveries survive outages. A receiver that is down, then answers 503,
 * then 200 gets the event after, with the same webhook-id on every attempt; a delivery
 * retried past retryForMs is failed. (The 30 s outage is the same scenario on a
 * short backoff: config firstRetryMs 100 ms.) A receiver that never answers holds up no
 * other webhook's deliveries. On SQLite and MariaDB.
 */
import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { forEachDatabase, startService } from './helpers/service.ts'
import { keyTestGroups } from './helpers/keys.ts'
import { fastWebhooks, startReceiver } from './helpers/webhookReceiver.ts'

const settle = (ms: number) => new Promise((done) => setTimeout(done, ms))

t.test('receiver down, then failing, then up: delivered after, same webhook-id', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    const groups = await keyTestGroups(service)
    t.equal((await service.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: ['key.changed'] }, today: true })).status, 200)
    const key = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Outage', GroupId: [groups.aclReader], Require_Https: 0 }, today: true })

    await receiver.down()
    t.equal((await service.call('POST', '/Api/Edit/Key', { body: { KeyId: key.json.Id, Phone: '555' }, today: true })).status, 200)
    await settle(800)
    const pending = (await service.call('POST', '/Api/Read/Deliveries', { body: {} })).json.Deliveries[0]
    t.match(pending, { Status: 'pending', LastStatus: null, LastError: /ECONNREFUSED/, NextAttempt: String })
    t.ok(pending.Attempts >= 2, `retried while down (${pending.Attempts} attempts)`)

    receiver.status = 503
    await receiver.up()
    await settle(600)
    const failing = (await service.call('POST', '/Api/Read/Deliveries', { body: {} })).json.Deliveries[0]
    t.match(failing, { Status: 'pending', LastStatus: 503, LastError: 'The receiver answered 503.' })
    receiver.status = 200
    const [delivered] = await receiver.waitFor(1)
    t.equal(delivered.id, pending.Id, 'the webhook-id of the delivery')
    t.ok(receiver.attemptIds.length >= 2, 'the receiver saw retries')
    t.same(new Set(receiver.attemptIds), new Set([pending.Id]), 'the same webhook-id on every attempt')
    await settle(300)
    t.equal(receiver.received.length, 1, 'delivered once')
    const done = (await service.call('POST', '/Api/Read/Deliveries', { body: {} })).json.Deliveries[0]
    t.match(done, { Id: pending.Id, Status: 'delivered', LastStatus: 200, LastError: null, NextAttempt: null, Delivered: String })
  }))

t.test('retried until retryForMs, then failed', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: { ...fastWebhooks, webhooks: { ...fastWebhooks.webhooks!, retryForMs: 1000 } } })
    const receiver = await startReceiver(t)
    receiver.status = 500
    const groups = await keyTestGroups(service)
    await service.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: ['key.rotated'] }, today: true })
    const key = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Doomed', GroupId: [groups.aclReader], Require_Https: 0 }, today: true })
    await service.call('POST', '/Api/Rotate/Key', { body: { KeyId: key.json.Id, OldSecretValidFor: 0 }, today: true })
    let delivery: { Status: string; Attempts: number } | undefined
    for (let wait = 0; wait < 100 && delivery?.Status !== 'failed'; wait++) {
      await settle(50)
      delivery = (await service.call('POST', '/Api/Read/Deliveries', { body: {} })).json.Deliveries[0]
    }
    t.match(delivery, { Status: 'failed', LastStatus: 500, NextAttempt: null, Delivered: null })
    const attempts = receiver.attempts
    await settle(300)
    t.equal(receiver.attempts, attempts, 'no attempt after failing')
    t.equal((await service.call('POST', '/Api/Read/Deliveries', { body: { Status: 'failed' } })).json.Total, 1)
  }))

t.test('disabling a webhook fails its pending deliveries; enabling it again sends none of them', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    receiver.status = 503
    const groups = await keyTestGroups(service)
    const webhook = await service.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: ['key.changed'] }, today: true })
    const key = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Parked', GroupId: [groups.aclReader], Require_Https: 0 }, today: true })
    t.equal((await service.call('POST', '/Api/Edit/Key', { body: { KeyId: key.json.Id, Phone: '555' }, today: true })).status, 200)
    for (let wait = 0; wait < 100 && receiver.attempts === 0; wait++) await settle(50)
    t.match((await service.call('POST', '/Api/Read/Deliveries', { body: {} })).json.Deliveries[0], { Status: 'pending', LastStatus: 503 })

    t.equal((await service.call('POST', '/Api/Edit/Webhook', { body: { Id: webhook.json.Id, Disabled: 1 }, today: true })).status, 200)
    const failed = (await service.call('POST', '/Api/Read/Deliveries', { body: {} })).json.Deliveries[0]
    t.match(failed, { Status: 'failed', LastError: 'The webhook is disabled.', NextAttempt: null, Delivered: null }, 'failed at once')
    receiver.status = 200
    t.equal((await service.call('POST', '/Api/Edit/Webhook', { body: { Id: webhook.json.Id, Disabled: 0 }, today: true })).status, 200)
    await settle(500)
    t.equal(receiver.received.length, 0, 'the failed delivery is not sent after the webhook is enabled again')
    t.match((await service.call('POST', '/Api/Read/Deliveries', { body: {} })).json.Deliveries[0], { Status: 'failed' })
  }))

t.test('a receiver that never answers holds up no other webhook: its sends are bounded, others go at the next poll', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: { ...fastWebhooks, webhooks: { ...fastWebhooks.webhooks!, timeoutMs: 4000 } } })
    // Takes every request and never answers; counts the requests open at once.
    let open = 0
    let mostOpen = 0
    const hanging = createServer((request, response) => {
      open++
      mostOpen = Math.max(mostOpen, open)
      response.on('close', () => open--)
      request.resume()
    })
    await new Promise<void>((done) => hanging.listen(0, '127.0.0.1', done))
    t.teardown(() => {
      hanging.closeAllConnections()
      hanging.close()
    })
    const hangingUrl = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/hook`
    const receiver = await startReceiver(t)
    const groups = await keyTestGroups(service)
    for (let n = 0; n < 3; n++) {
      t.equal((await service.call('POST', '/Api/Create/Webhook', { body: { Url: hangingUrl, Events: ['key.changed'] }, today: true })).status, 200)
    }
    t.equal((await service.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: ['key.rotated'] }, today: true })).status, 200)
    const key = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Busy', GroupId: [groups.aclReader], Require_Https: 0 }, today: true })
    // 60 deliveries due to the hanging receiver: 20 edits, 3 webhooks each.
    for (let edit = 0; edit < 20; edit++) {
      t.equal((await service.call('POST', '/Api/Edit/Key', { body: { KeyId: key.json.Id, Phone: `55${edit}` }, today: true })).status, 200)
    }
    for (let wait = 0; wait < 100 && open < 6; wait++) await settle(20)
    const rotatedAt = Date.now()
    t.equal((await service.call('POST', '/Api/Rotate/Key', { body: { KeyId: key.json.Id, OldSecretValidFor: 0 }, today: true })).status, 200)
    await receiver.waitFor(1)
    const took = Date.now() - rotatedAt
    t.ok(took < 1000, `the other webhook's delivery went within a poll or so (${took} ms; the hanging sends time out after 4000 ms)`)
    t.equal(mostOpen, 6, 'at most 2 sends in flight per webhook')
  }))

t.test('a receiver that never answers does not hold the service stop: the send is cut short and retried after the restart, same webhook-id', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // timeoutMs is long, so only the stop itself can end the attempt within the test.
    const service = await startService(t, { kind, config: { ...fastWebhooks, webhooks: { ...fastWebhooks.webhooks!, timeoutMs: 60_000 } } })
    const ids: string[] = []
    let answer = false
    const receiver = createServer((request, response) => {
      ids.push(String(request.headers['webhook-id']))
      request.resume()
      if (answer) response.writeHead(204).end()
    })
    await new Promise<void>((done) => receiver.listen(0, '127.0.0.1', done))
    t.teardown(() => {
      receiver.closeAllConnections()
      receiver.close()
    })
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`
    const groups = await keyTestGroups(service)
    t.equal((await service.call('POST', '/Api/Create/Webhook', { body: { Url: url, Events: ['key.changed'] }, today: true })).status, 200)
    const key = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Hung', GroupId: [groups.aclReader], Require_Https: 0 }, today: true })
    t.equal((await service.call('POST', '/Api/Edit/Key', { body: { KeyId: key.json.Id, Phone: '555' }, today: true })).status, 200)
    for (let wait = 0; wait < 200 && ids.length === 0; wait++) await settle(20)
    t.equal(ids.length, 1, 'the receiver took the request and hangs')
    const stopping = Date.now()
    answer = true
    const restarted = await service.restart()
    t.ok(Date.now() - stopping < 5000, `the stop did not wait for the hanging receiver (${Date.now() - stopping} ms)`)
    for (let wait = 0; wait < 200 && ids.length < 2; wait++) await settle(20)
    await settle(200)
    const [delivery] = (await restarted.call('POST', '/Api/Read/Deliveries', { body: {} })).json.Deliveries
    t.match(delivery, { Id: ids[0], Status: 'delivered', LastStatus: 204 }, 'delivered after the restart')
    t.same(new Set(ids), new Set([ids[0]]), 'the same webhook-id on both attempts')
  }))
