/**
 * Credits (issue 16 item 2): Credits and Refill set at create and edit (AddCredits tops
 * up), spent in the database one per call (a route's cost more), exact under 200
 * concurrent calls, 429 `Error: No credits left (refill <HTTP-date>)` spending nothing
 * further, the refill at its UTC period boundary (fake clock), and /Api/Read/Limits.
 */
import t from 'tap'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { rootGroupIds, type TestKey } from './helpers/keys.ts'
import type { Plugin } from '../kernel/plugin.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'

async function storedCredits(service: Service, keyId: number) {
  const row = await service.kernel.database.db.selectFrom('api_keys').select(['credits', 'refill_amount', 'refill_every', 'refill_at']).where('id', '=', keyId).executeTakeFirstOrThrow()
  return {
    credits: row.credits === null ? null : Number(row.credits),
    refill_amount: row.refill_amount === null ? null : Number(row.refill_amount),
    refill_every: row.refill_every,
    refill_at: row.refill_at === null ? null : Number(row.refill_at),
  }
}

/** The count as last set and when (what credits without a Refill tell 80 % of). */
async function countAsSet(service: Service, keyId: number) {
  const row = await service.kernel.database.db.selectFrom('api_keys').select(['credits_set', 'credits_set_at']).where('id', '=', keyId).executeTakeFirstOrThrow()
  return [row.credits_set, row.credits_set_at].map((value) => (value === null ? null : Number(value)))
}

async function createKey(service: Service, body: Record<string, unknown>, date?: string): Promise<TestKey> {
  // Every group the admin may assign (not the key-creating one).
  const groups = ((await service.call('GET', '/Api/Read/Groups', { date })).json as { Id: number }[]).map((group) => group.Id)
  const created = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: `credits ${Math.random().toString(36).slice(2)}`, GroupId: groups, Require_Https: 0, ...body }, date })
  if (created.status !== 200) throw new Error(`create: ${created.status} ${created.text}`)
  return { id: created.json.Id, apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
}

const expensive: Plugin = {
  name: 'expensive',
  defaultGroups: [{ name: 'Expensive', paths: [{ path: '/Report/Read/Expensive', displayName: 'A report that costs 5 credits' }] }],
  setup: () => [{ method: 'GET', path: '/Report/Read/Expensive', cost: 5, xml: { root: 'Report' }, handler: () => ({ Ok: 1 }) }],
}

t.test('200 concurrent calls against 50 credits: exactly 50 answers of 200', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const key = await createKey(service, { Credits: 50 })
    const answers = await Promise.all(Array.from({ length: 200 }, () => service.call('GET', '/Api/Read/Acl', { key })))
    const statuses = new Map<number, number>()
    for (const answer of answers) statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1)
    t.same([...statuses.entries()].sort(), [[200, 50], [429, 150]])
    const refused = answers.find((answer) => answer.status === 429)!
    t.equal(refused.text, 'Error: No credits left', 'no refill: no refill date')
    t.equal(refused.headers.get('retry-after'), null)
    t.same(await storedCredits(service, key.id), { credits: 0, refill_amount: null, refill_every: null, refill_at: null }, 'never below zero')
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 429)
    t.equal((await storedCredits(service, key.id)).credits, 0, 'a refused call spends nothing')
  }))

t.test('create, edit, AddCredits, costs and the listing', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [expensive] })
    const unlimited = await createKey(service, {})
    t.same(await storedCredits(service, unlimited.id), { credits: null, refill_amount: null, refill_every: null, refill_at: null })

    const key = await createKey(service, { Credits: 3 })
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200)
    const costly = await service.call('GET', '/Report/Read/Expensive', { key })
    t.equal(costly.status, 429, 'a route of cost 5 with 2 left')
    t.equal(costly.text, 'Error: No credits left')
    t.equal((await storedCredits(service, key.id)).credits, 2, 'the refused call spent nothing')

    const edit = (body: Record<string, unknown>) => service.call('POST', '/Api/Edit/Key', { today: true, body: { KeyId: key.id, ...body } })
    const topped = await edit({ AddCredits: 4 })
    t.equal(topped.status, 200)
    t.same(Object.keys(topped.json), ['Id', 'Api_Key', 'Api_Secret', 'Name', 'MaxHits'], 'the edit answer is as before')
    t.equal((await storedCredits(service, key.id)).credits, 6)
    t.equal((await service.call('GET', '/Report/Read/Expensive', { key })).status, 200, 'cost 5 of 6')
    t.equal((await storedCredits(service, key.id)).credits, 1)

    t.equal((await edit({ Credits: 10 })).status, 200)
    t.equal((await storedCredits(service, key.id)).credits, 10, 'Credits sets')

    const both = await edit({ Credits: 1, AddCredits: 1 })
    t.equal(both.status, 400)
    t.equal(both.text, 'Error: Give Credits (sets the count) or AddCredits (adds to it), not both.')
    const refillUnlimited = await edit({ Credits: null, Refill: { Amount: 5, Every: '1Day' } })
    t.equal(refillUnlimited.status, 400)
    t.equal(refillUnlimited.text, 'Error: Refill needs Credits: a key with unlimited Credits (null) has nothing to refill.')
    const badEvery = await edit({ Refill: { Amount: 5, Every: '1Week' } })
    t.equal(badEvery.status, 400)
    const noAmount = await edit({ Refill: { Every: '1Day' } })
    t.equal(noAmount.text, 'Error: Refill.Amount is required.', 'a nested field is named with its object')
    const negative = await edit({ Credits: -1 })
    t.equal(negative.status, 400)
    const addToUnlimited = await service.call('POST', '/Api/Edit/Key', { today: true, body: { KeyId: unlimited.id, AddCredits: 5 } })
    t.equal(addToUnlimited.status, 400)
    t.equal(addToUnlimited.text, 'Error: AddCredits needs a key with Credits; this key is unlimited (set Credits instead).')
    const addAtCreate = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'no add', GroupId: await rootGroupIds(service), AddCredits: 5 } })
    t.equal(addAtCreate.status, 400)
    t.equal((await storedCredits(service, key.id)).credits, 10, 'refused edits changed nothing')

    // A Refill given to an unlimited key starts it at the Amount.
    t.equal((await service.call('POST', '/Api/Edit/Key', { today: true, body: { KeyId: unlimited.id, Refill: { Amount: 7, Every: '1Mon' } } })).status, 200)
    const started = await storedCredits(service, unlimited.id)
    t.match(started, { credits: 7, refill_amount: 7, refill_every: '1Mon' })
    const now = new Date()
    t.equal(started.refill_at, Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1), 'the 1st of next month, 00:00 UTC')

    const listing = await service.call('GET', '/Api/Read/Keys')
    t.equal(listing.status, 200)
    const listed = (listing.json as { Id: number; Credits: unknown; Refill: unknown }[])
    t.match(listed.find((row) => row.Id === key.id), { Credits: 10, Refill: null })
    t.match(listed.find((row) => row.Id === unlimited.id), { Credits: 7, Refill: { Amount: 7, Every: '1Mon' } })

    // Credits null: unlimited again, and the refill ends with it; the edit counts at once.
    t.equal((await edit({ Credits: 0 })).status, 200)
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 429)
    t.equal((await edit({ Credits: null })).status, 200)
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200, 'unlimited from the next call')
    t.same(await storedCredits(service, key.id), { credits: null, refill_amount: null, refill_every: null, refill_at: null })
    t.same(await countAsSet(service, key.id), [null, null], 'no count as set either')
  }))

const touching: Plugin = {
  name: 'touching',
  defaultGroups: [{ name: 'Touching', paths: [{ path: '/Report/Update/Touch', displayName: 'A write that takes no body' }] }],
  setup: () => [{ method: 'POST', path: '/Report/Update/Touch', xml: { root: 'Touch' }, handler: () => ({ Ok: 1 }) }],
}

t.test('a write sent again and refused as a replay spends no credit', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [touching] })
    const key = await createKey(service, { Credits: 10 })
    const sendTwice = async (path: string, body?: string) => {
      // One signature, sent twice as captured: the second is the replay.
      const headers = { ...signedHeaders(key, 'POST', path, body), ...(body === undefined ? {} : { 'content-type': 'application/json' }) }
      const statuses: number[] = []
      for (let round = 0; round < 2; round++) {
        const response = await fetch(service.base + path, { method: 'POST', headers, body })
        statuses.push(response.status)
        if (round === 1) t.equal(await response.text(), 'Error: This request was already used (replay).')
        else await response.arrayBuffer()
      }
      return statuses
    }
    // With a body (the read-the-body-last order) and without one.
    t.same(await sendTwice('/People/Update/OneChange', JSON.stringify({ FirstName: 'Once', LastName: 'Only' })), [200, 401])
    t.equal((await storedCredits(service, key.id)).credits, 9, 'one credit: the replay spent none')
    t.same(await sendTwice('/Report/Update/Touch'), [200, 401])
    t.equal((await storedCredits(service, key.id)).credits, 8, 'one credit: the replay spent none')
  }))

t.test('refill at the period boundary (fake clock)', (t) =>
  forEachDatabase(t, async (t, kind) => {
    let now = Date.UTC(2026, 10, 23, 23, 59, 0)
    const service = await startService(t, { kind, clock: () => now })
    // AllowHours 0: the fake clock is far from the signing date.
    // The admin key signs with the fake clock's date (its window is 5 minutes).
    const date = () => new Date(now).toUTCString()
    const key = await createKey(service, { Credits: 2, Refill: { Amount: 3, Every: '1Day' }, AllowHours: 0 }, date())
    t.match(await storedCredits(service, key.id), { credits: 2, refill_amount: 3, refill_every: '1Day', refill_at: Date.UTC(2026, 10, 24) })
    t.same(await countAsSet(service, key.id), [2, now])
    const statuses = async (count: number) => {
      const result = []
      for (let index = 0; index < count; index++) result.push((await service.call('GET', '/Api/Read/Acl', { key })).status)
      return result
    }
    t.same(await statuses(2), [200, 200])
    const spent = await service.call('GET', '/Api/Read/Acl', { key })
    t.equal(spent.status, 429)
    t.equal(spent.text, 'Error: No credits left (refill Tue, 24 Nov 2026 00:00:00 GMT)')
    t.equal(spent.headers.get('retry-after'), '60')

    now = Date.UTC(2026, 10, 23, 23, 59, 59, 999)
    t.same(await statuses(1), [429], 'not a millisecond early')
    now = Date.UTC(2026, 10, 24, 0, 0, 0)
    t.same(await statuses(4), [200, 200, 200, 429], 'the Amount (3), not added to what was left')
    t.same(await countAsSet(service, key.id), [3, Date.UTC(2026, 10, 24)], 'a refill sets the count, at its boundary')
    const next = await service.call('GET', '/Api/Read/Acl', { key })
    t.equal(next.text, 'Error: No credits left (refill Wed, 25 Nov 2026 00:00:00 GMT)')

    // Several days without a call: one refill, to the Amount, and the next boundary after now.
    now = Date.UTC(2026, 10, 28, 13, 0, 0)
    const limits = await service.call('GET', '/Api/Read/Limits', { key })
    t.equal(limits.status, 200)
    t.same(limits.json.Credits, { Remain: 2, Refill: { Amount: 3, Every: '1Day' }, RefillDate: 'Sun, 29 Nov 2026 00:00:00 GMT', TimeLeft: '11 Hours' }, 'the limits read spent one itself')
    t.match(await storedCredits(service, key.id), { credits: 2, refill_at: Date.UTC(2026, 10, 29) })

    // A top-up after a due refill takes the refill first: it is not wiped by the next call.
    now = Date.UTC(2026, 10, 29, 8, 0, 0)
    t.equal((await service.call('POST', '/Api/Edit/Key', { today: true, date: date(), body: { KeyId: key.id, AddCredits: 10 } })).status, 200)
    t.match(await storedCredits(service, key.id), { credits: 13, refill_at: Date.UTC(2026, 10, 30) })
    t.same(await countAsSet(service, key.id), [13, now], 'AddCredits sets the total')
    t.same(await statuses(1), [200])
    t.equal((await storedCredits(service, key.id)).credits, 12)

    // Monthly: the 1st of the next month.
    t.equal((await service.call('POST', '/Api/Edit/Key', { today: true, date: date(), body: { KeyId: key.id, Credits: 0, Refill: { Amount: 100, Every: '1Mon' } } })).status, 200)
    const monthly = await service.call('GET', '/Api/Read/Acl', { key })
    t.equal(monthly.text, 'Error: No credits left (refill Tue, 01 Dec 2026 00:00:00 GMT)')
    now = Date.UTC(2026, 11, 1)
    t.same(await statuses(1), [200])
    t.match(await storedCredits(service, key.id), { credits: 99, refill_at: Date.UTC(2027, 0, 1) })

    // An edit of the Refill alone, or its removal, while a refill is due keeps the refilled count.
    t.equal((await service.call('POST', '/Api/Edit/Key', { today: true, date: date(), body: { KeyId: key.id, Credits: 0 } })).status, 200)
    now = Date.UTC(2027, 0, 1, 9, 0, 0)
    t.equal((await service.call('POST', '/Api/Edit/Key', { today: true, date: date(), body: { KeyId: key.id, Refill: { Amount: 5, Every: '1Day' } } })).status, 200)
    t.match(await storedCredits(service, key.id), { credits: 100, refill_amount: 5, refill_every: '1Day', refill_at: Date.UTC(2027, 0, 2) }, 'the due 100, then the new schedule')
    t.same(await statuses(1), [200])
    t.equal((await service.call('POST', '/Api/Edit/Key', { today: true, date: date(), body: { KeyId: key.id, Credits: 0 } })).status, 200)
    now = Date.UTC(2027, 0, 2, 9, 0, 0)
    t.equal((await service.call('POST', '/Api/Edit/Key', { today: true, date: date(), body: { KeyId: key.id, Refill: null } })).status, 200)
    t.same(await storedCredits(service, key.id), { credits: 5, refill_amount: null, refill_every: null, refill_at: null }, 'the due 5 stay when the Refill ends')
    t.same(await countAsSet(service, key.id), [5, now], 'and are the count as set')
  }))

t.test('/Api/Read/Limits shows credits in json, xml and csv; keys without credits are unchanged', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const plain = await service.call('GET', '/Api/Read/Limits')
  t.same(plain.json, {}, 'no MaxHits, no credits: the D7 answer as before')
  const key = await createKey(service, { Credits: 5, MaxHits: '10/1Min' })
  const limits = await service.call('GET', '/Api/Read/Limits', { key })
  t.equal(limits.status, 200)
  t.same(Object.keys(limits.json), ['1Min', 'Credits'])
  t.match(limits.json['1Min'], { Limit: 10, Remain: 9 })
  t.same(limits.json.Credits, { Remain: 4, Refill: null, RefillDate: null, TimeLeft: null })
  const csv = await service.call('GET', '/Api/Read/Limits?format=csv', { key })
  const lines = csv.text.split('\r\n')
  t.equal(lines[0], 'Window,Limit,Remain,ResetDate,TimeLeft')
  t.equal(lines[2], 'Credits,,3,,')
  const xml = await service.call('GET', '/Api/Read/Limits?format=xml', { key })
  t.match(xml.text, /<Window>\s*<Window>Credits<\/Window>\s*<Limit\/>\s*<Remain>2<\/Remain>/)
})
