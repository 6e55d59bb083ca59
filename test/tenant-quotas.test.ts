/**
 * Tenant-wide quotas (issue 16 item 3): a tenant's MaxHits counts every call of every
 * key of that tenant together (and a parent's, every customer's together); a new key
 * of the tenant cannot reset it; the 429 names the tenant limit; /Api/Read/Limits shows
 * the key's and the tenant's windows; `admin tenant set --max-hits` sets it.
 */
import t, { type Test } from 'tap'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { withRedis } from './helpers/redis.ts'
import { createKernel } from '../kernel/boot/kernel.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'
import { silentLogger } from '../kernel/observe/logger.ts'
import { adminOn as admin } from './helpers/adminCli.ts'
import { insertKey, type TestKey } from './helpers/keys.ts'
import { setEntitlement } from './helpers/tenants.ts'

t.test('a tenant quota across three keys and a recreated key; the parent-wide quota', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    await setEntitlement(service, 7, 1, { MaxHits: '6/1Mon' })
    await setEntitlement(service, 7, 0, { MaxHits: '9/1Mon' })
    const [a, b] = [await insertKey(service, { parent: 7, custno: 1 }), await insertKey(service, { parent: 7, custno: 1 })]
    const c = await insertKey(service, { parent: 7, custno: 1, max_hits: '100/1Min' })
    const other = await insertKey(service, { parent: 7, custno: 2 })
    const call = (key: TestKey) => service.call('GET', '/Api/Read/Acl', { key })

    const limits = await service.call('GET', '/Api/Read/Limits', { key: c })
    t.equal(limits.status, 200)
    t.same(Object.keys(limits.json), ['1Min', 'Tenant', 'ParentTenant'], 'the key\'s windows as before, then the tenant\'s')
    t.match(limits.json['1Min'], { Limit: 100, Remain: 99 })
    t.match(limits.json.Tenant, { '1Mon': { Limit: 6, Remain: 5, TimeLeft: '30 Days' } })
    t.match(limits.json.ParentTenant, { '1Mon': { Limit: 9, Remain: 8 } })
    t.equal(limits.headers.get('ratelimit-policy'), '"tenant-1Mon";q=6;w=2592000', 'the tightest window is the tenant\'s')
    t.equal(limits.headers.get('ratelimit'), '"tenant-1Mon";r=5;t=2592000')
    const csv = await service.call('GET', '/Api/Read/Limits?format=csv', { key: c })
    t.same(csv.text.split('\r\n').map((line) => line.split(',')[0]), ['Window', '1Min', 'Tenant 1Mon', 'ParentTenant 1Mon'])

    const statuses = []
    for (const key of [a, b, a, b]) statuses.push((await call(key)).status)
    t.same(statuses, [200, 200, 200, 200], 'six calls of three keys (the two limits reads included)')
    const refused = await call(a)
    t.equal(refused.status, 429)
    t.equal(refused.text, 'Error: Tenant rate limit exceeded (6/1Mon)')
    t.ok(Number(refused.headers.get('retry-after')) > 2_500_000, 'Retry-After: when the month frees up')
    t.equal((await call(c)).status, 429, 'the key with room in its own window too')
    t.equal((await call(b)).status, 429)

    const recreated = await insertKey(service, { parent: 7, custno: 1 })
    const fresh = await call(recreated)
    t.equal(fresh.status, 429, 'a new key of the tenant does not reset the count')
    t.equal(fresh.text, 'Error: Tenant rate limit exceeded (6/1Mon)')
    // Nor does a rotation: the quota belongs to the tenant, not to a key or its secret.
    const rotatable = await insertKey(service, { parent: 7, custno: 1, created_by: service.admin.id })
    const rotated = await service.call('POST', '/Api/Rotate/Key', { today: true, body: { KeyId: rotatable.id, OldSecretValidFor: 0 } })
    t.equal(rotated.status, 200, rotated.text)
    const afterRotation = await call({ id: rotatable.id, apiKey: rotatable.apiKey, secret: rotated.json.Api_Secret })
    t.equal(afterRotation.status, 429, 'a rotated key does not reset the count')
    t.equal(afterRotation.text, 'Error: Tenant rate limit exceeded (6/1Mon)')

    // Refused calls gave their point back to the parent: 6 of 9 are spent there.
    const others = []
    for (let index = 0; index < 4; index++) others.push(await call(other))
    t.same(others.map((answer) => answer.status), [200, 200, 200, 429], 'customer 2 meets the parent-wide quota')
    t.equal(others[3].text, 'Error: Tenant rate limit exceeded (9/1Mon)')

    // A key of another parent is not touched; without quotas the answers carry no RateLimit fields.
    const stranger = await insertKey(service, { parent: 8, custno: 1 })
    const free = await call(stranger)
    t.equal(free.status, 200)
    t.equal(free.headers.get('ratelimit'), null)
  }))

t.test('a key\'s own window refuses with its own text; the tenant\'s count is given back', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  await setEntitlement(service, 3, 0, { MaxHits: '50/1Hour' })
  const key = await insertKey(service, { parent: 3, custno: 0, max_hits: '2/1Min' })
  const answers = []
  for (let index = 0; index < 3; index++) answers.push(await service.call('GET', '/Api/Read/Acl', { key }))
  t.same(answers.map((answer) => answer.status), [200, 200, 429])
  t.equal(answers[2].text, 'Error: Rate limit exceeded (2/1Min)')
  const reader = await insertKey(service, { parent: 3, custno: 0 })
  const limits = await service.call('GET', '/Api/Read/Limits', { key: reader })
  t.same(Object.keys(limits.json), ['Tenant'])
  t.match(limits.json.Tenant, { '1Hour': { Limit: 50, Remain: 47 } }, 'two calls and this read: the refused call spent nothing of the tenant\'s hour')
})

// SQLite only: each command is a process start; the kernel code behind it is tested on both databases above.
t.test('admin tenant set --max-hits', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const set = await admin(service, 'tenant', 'set', '--parent', '4', '--custno', '0', '--max-hits', ' 3/1min ', '--json')
  t.equal(set.code, 0, set.stderr)
  t.match(JSON.parse(set.stdout), { Parent: 4, Custno: 0, MaxHits: '3/1Min' }, 'stored in its canonical spelling')
  const bad = await admin(service, 'tenant', 'set', '--parent', '4', '--custno', '0', '--max-hits', '3 per minute')
  t.equal(bad.code, 2)
  t.match(bad.stderr, "--max-hits: MaxHits item '3 per minute' is not of the form")

  const key = await insertKey(service, { parent: 4, custno: 0 })
  const statuses = []
  for (let index = 0; index < 4; index++) statuses.push((await service.call('GET', '/Api/Read/Acl', { key })).status)
  t.same(statuses, [200, 200, 200, 429])

  const cleared = await admin(service, 'tenant', 'set', '--parent', '4', '--custno', '0', '--max-hits', 'none', '--json')
  t.equal(cleared.code, 0, cleared.stderr)
  t.equal(JSON.parse(cleared.stdout).MaxHits, null)
  t.match(cleared.stderr, "the tenant's MaxHits: a running service sees this within 5 s")
  // The CLI is another process: it moves the change stamp, which the service reads every 5 s,
  // not after the key's cached record expires (cache.keyTtlSeconds, 60 s).
  const waitedFrom = Date.now()
  let status = 429
  while (status === 429 && Date.now() - waitedFrom < 8_000) {
    status = (await service.call('GET', '/Api/Read/Acl', { key })).status
    if (status === 429) await new Promise((resolve) => setTimeout(resolve, 250))
  }
  t.equal(status, 200, 'no quota any more, within the stamp\'s 5 s')
})

t.test('a tenant window is named as that tenant\'s quota writes it, though 7/60Sec and 7/1Min count alike', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    await setEntitlement(service, 4, 1, { MaxHits: '7/60Sec' })
    await setEntitlement(service, 4, 2, { MaxHits: '7/1Min' })
    const seconds = await insertKey(service, { parent: 4, custno: 1 })
    const minute = await insertKey(service, { parent: 4, custno: 2 })
    for (const [key, label] of [[seconds, '60Sec'], [minute, '1Min'], [seconds, '60Sec']] as const) {
      const answer = await service.call('GET', '/Api/Read/Limits', { key })
      t.same(Object.keys(answer.json.Tenant), [label])
      t.equal(answer.headers.get('ratelimit-policy'), `"tenant-${label}";q=7;w=60`, `${label}: the tenant's own name`)
    }
  }))

/** A second process on the service's database (and Redis, when it has one). */
async function sibling(t: Test, service: Service): Promise<string> {
  const kernel = await createKernel({ config: { ...service.config, port: 0 }, report: () => undefined, logger: silentLogger() })
  t.teardown(() => kernel.close())
  return (await kernel.listen()).url
}

/** A signed call to `base`, dated to the millisecond so concurrent calls are distinct requests. */
async function callAt(base: string, key: TestKey, path: string) {
  const response = await fetch(base + path, { headers: signedHeaders(key, 'GET', path, undefined, { date: new Date().toISOString() }) })
  return { status: response.status, text: await response.text(), retryAfter: response.headers.get('retry-after') }
}

/** 100 calls at once by four keys of tenant 7/1 (quota 20/1Hour), alternating between two processes. */
async function burst(t: Test, service: Service) {
  const bases = [service.base, await sibling(t, service)]
  await setEntitlement(service, 7, 1, { MaxHits: '20/1Hour' })
  const keys = await Promise.all([0, 1, 2, 3].map(() => insertKey(service, { parent: 7, custno: 1 })))
  const answers = await Promise.all(Array.from({ length: 100 }, (_, index) => callAt(bases[index % 2], keys[index % 4], '/Api/Read/Acl')))
  const refused = answers.filter((answer) => answer.status === 429)
  t.ok(refused.every((answer) => answer.text === 'Error: Tenant rate limit exceeded (20/1Hour)' && Number(answer.retryAfter) > 3000), 'every refusal names the tenant quota, with Retry-After')
  return { answered: answers.filter((answer) => answer.status === 200).length, refused: refused.length, others: answers.length - answers.filter((answer) => answer.status === 200 || answer.status === 429).length }
}

t.test('two processes on MariaDB: with Redis a tenant quota is counted once for all; without, per process (docs/scaling.md)', async (t) => {
  await forEachDatabase(t, async (t, kind) => {
    if (kind === 'sqlite') return void t.pass('several hosts share MariaDB (one host\'s processes: WORKERS, test/credits-cluster.test.ts)')
    await withRedis(t, 'with Redis', async (t, redisUrl) => {
      const service = await startService(t, { kind, config: { redisUrl } })
      t.same(await burst(t, service), { answered: 20, refused: 80, others: 0 }, 'exactly the quota answered across both processes')
    })
    await t.test('without Redis', async (t) => {
      const service = await startService(t, { kind })
      t.same(await burst(t, service), { answered: 40, refused: 60, others: 0 }, 'each process answers up to the quota')
    })
  })
})
