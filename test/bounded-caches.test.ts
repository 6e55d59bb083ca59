/**
 * Issue 19 goal 4: memory stays bounded however many distinct keys call. Checked
 * structurally, never by time or RSS: after more distinct keys than `cache.maxEntries`
 * have each called (signed, rate-limited, cached answers), the per-key memories hold
 * no more than their bounds, and every call was still answered correctly.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadConfig } from '../kernel/boot/config.ts'
import { MemoryWindowLimiter, RateLimits, inMemoryLimiters, rateCountsMax } from '../kernel/limits/rateLimits.ts'
import { parseMaxHits } from '../kernel/limits/maxHits.ts'
import type { CallerKey } from '../kernel/plugin.ts'
import { answerSize, ResponseCache } from '../kernel/http/responseCache.ts'
import { forEachDatabase, startService } from './helpers/service.ts'
import { insertKey } from './helpers/keys.ts'

const maxEntries = 20
const callers = 3 * maxEntries

t.test('a rate-limit window counts at most its bound of keys; the oldest-opened go first', async (t) => {
  let now = 1_000_000
  const limiter = new MemoryWindowLimiter(2, 3_600_000, () => now, 5)
  for (let key = 0; key < 12; key++) await limiter.consume(key)
  t.ok(limiter.size <= 5, `12 keys counted, ${limiter.size} kept`)
  // The newest key keeps its count: a second call uses its last point, a third is refused.
  await limiter.consume(11)
  await t.rejects(limiter.consume(11), 'the newest count was kept')
  // An expired count makes room before a live one is dropped.
  now += 3_600_001
  await limiter.consume('fresh')
  t.equal(limiter.size, 1, 'expired counts swept first')

  // A short window does not hold its expired counts until the bound or the minute's sweep.
  const perSecond = new MemoryWindowLimiter(5, 1000, () => now, 100_000)
  for (let key = 0; key < 1000; key++) await perSecond.consume(key)
  t.equal(perSecond.size, 1000)
  now += 1001
  await perSecond.consume('next second')
  t.equal(perSecond.size, 1, 'a 1Sec window forgets the last second\'s keys a second later')
})

t.test('cached answers stay within cache.responseBytes, counting their keys and headers too', async (t) => {
  const maxBytes = 65_536
  const cache = new ResponseCache(10_000, maxBytes)
  // A POST read's key holds its whole body: 2,000 bytes of key beside a 100-byte answer.
  const answer = { status: 200, body: Buffer.alloc(100, 'a'), contentType: 'application/json', headers: [['RateLimit-Policy', '"1Hour";q=1000;w=3600']] as [string, string][] }
  for (let index = 0; index < 200; index++) cache.set(cache.key(1, `key:${index}`, `json\u0000\u0000${String(index).padStart(2000, 'x')}`), answer, 60)
  t.ok(cache.size > 0, 'answers are kept')
  t.ok(cache.size * (2000 + 100) <= maxBytes, `${cache.size} answers of 2,100 bytes of key and body fit in ${maxBytes} bytes`)
  t.ok(answerSize(answer, 'k') > 100 + 1, 'an answer costs more than its body')
})

t.test('byte-identical cached bodies are kept once, and go with the last answer that uses them', async (t) => {
  let now = 1_000_000
  const cache = new ResponseCache(5, 1 << 20, () => now)
  // Slices of one pooled block, as encoders make them: each kept answer must not pin the block.
  const pooled = Buffer.from('{"Acl":["/Api/Read/Acl"]}{"Acl":["/Api/Read/Acl"]}')
  const answer = (body: Buffer) => ({ status: 200, body, contentType: 'application/json', headers: [] as [string, string][] })
  for (let keyId = 1; keyId <= 4; keyId++) cache.set(cache.key(1, `key:${keyId}`, 'json'), answer(pooled.subarray(0, 25)), 60)
  t.equal(cache.size, 4)
  t.equal(cache.sharedBodies, 1, 'four answers, one body')
  const first = cache.get(cache.key(1, 'key:1', 'json'))!.body
  t.equal(cache.get(cache.key(1, 'key:4', 'json'))!.body, first, 'the same bytes, the same buffer')
  t.not(first.buffer, pooled.buffer, 'a copy of its own, not a view of the pooled block')
  t.equal(first.toString(), '{"Acl":["/Api/Read/Acl"]}')
  // Same length, other bytes: another body.
  cache.set(cache.key(1, 'key:5', 'json'), answer(Buffer.from('{"Acl":["/Api/Read/Log"]}')), 60)
  t.equal(cache.sharedBodies, 2)
  t.equal(cache.get(cache.key(1, 'key:5', 'json'))!.body.toString(), '{"Acl":["/Api/Read/Log"]}')
  // Evicted (a sixth answer in five places), replaced, invalidated, expired, cleared: each lets go of its body.
  cache.set(cache.key(1, 'key:6', 'json'), answer(Buffer.from('other')), 60)
  t.equal(cache.size, 5)
  t.equal(cache.sharedBodies, 3)
  cache.set(cache.key(1, 'key:6', 'json'), answer(Buffer.from('replaced')), 60)
  t.equal(cache.sharedBodies, 3, 'the replaced body went, its replacement came')
  now += 60_001
  for (let keyId = 1; keyId <= 6; keyId++) t.equal(cache.get(cache.key(1, `key:${keyId}`, 'json')), undefined, 'expired or evicted')
  t.equal(cache.size, 0)
  t.equal(cache.sharedBodies, 0, 'no body outlives its answers')
  for (let keyId = 1; keyId <= 3; keyId++) cache.set(cache.key(1, `key:${keyId}`, 'json'), answer(Buffer.from('again')), 60)
  t.equal(cache.sharedBodies, 1)
  cache.clear()
  t.equal(cache.sharedBodies, 0, 'cleared with its answers')
  // An answer over the whole bound is not kept, and holds no body.
  const small = new ResponseCache(5, 65_536, () => now)
  small.set(small.key(1, 'key:1', 'json'), answer(Buffer.alloc(70_000)), 60)
  t.equal(small.size, 0)
  t.equal(small.sharedBodies, 0)
  const owned = Buffer.alloc(5000, 'p')
  small.set(small.key(1, 'key:1', 'json'), answer(owned), 60)
  t.equal(small.get(small.key(1, 'key:1', 'json'))!.body, owned, 'a body with memory of its own is kept as it is, not copied')
})

t.test('partition invalidations are forgotten once no older answer can live, and never bring one back', async (t) => {
  // Not 0: lru-cache reads a start time of 0 as "no TTL".
  let now = 1_000_000
  const cache = new ResponseCache(1000, 1 << 20, () => now)
  const answer = (text: string) => ({ status: 200, body: Buffer.from(text), contentType: 'text/plain', headers: [] })
  const keyOf = (partition: string) => cache.key(1, partition, 'json')
  cache.set(keyOf('key:1'), answer('before'), 60)
  cache.invalidate('key:1')
  t.equal(cache.get(keyOf('key:1')), undefined, 'invalidated')
  cache.set(keyOf('key:1'), answer('after'), 60)
  // Every key changed once: the marks last one TTL, then go.
  for (let keyId = 2; keyId < 1002; keyId++) cache.invalidate(`key:${keyId}`)
  t.equal(cache.partitionMarks, 1001, 'each change leaves a mark while older answers may live')
  now += 60_001
  cache.invalidate('key:5000')
  t.equal(cache.partitionMarks, 1, 'marks older than the longest TTL are forgotten')
  t.equal(cache.get(keyOf('key:1')), undefined, 'no answer comes back once its mark is forgotten')
  // An answer cached late under a mark outlives the mark; the partition's next change must not reuse that generation.
  cache.invalidate('key:2')
  now += 59_000
  cache.set(keyOf('key:2'), answer('late'), 60)
  now += 2_000
  cache.invalidate('key:3')
  t.equal(cache.get(keyOf('key:2'))?.body.toString(), undefined, 'the late answer is out of reach once the mark goes')
  cache.invalidate('key:2')
  t.equal(cache.get(keyOf('key:2')), undefined, 'and stays out of reach after the next change')
  // A burst of changes, then none: the next answer kept clears the expired marks.
  for (let keyId = 10; keyId < 110; keyId++) cache.invalidate(`key:${keyId}`)
  now += 60_001
  cache.set(keyOf('key:9'), answer('quiet'), 60)
  t.equal(cache.partitionMarks, 0, 'no marks left after a quiet TTL')

  // An answer computed across an invalidation of any partition is not kept.
  const epoch = cache.epoch
  const key = keyOf('key:7')
  cache.invalidate('key:7')
  cache.set(key, answer('stale'), 60, epoch)
  t.equal(cache.get(key), undefined, 'not kept under the replaced generation')
  let computed = 0
  const slow = cache.remember('tenant:1', 'Total', 60, async () => {
    cache.clear()
    return ++computed
  })
  t.equal(await slow, 1)
  t.equal(await cache.remember('tenant:1', 'Total', 60, async () => ++computed), 2, 'a value computed across a clear is computed again')
})

t.test('distinct MaxHits windows are bounded: idle ones are dropped, then the oldest past the bound', async (t) => {
  let now = 1_000_000
  const limits = new RateLimits(inMemoryLimiters(() => now), 5)
  const caller = (id: number, maxHits: string) => ({ id, rateWindows: parseMaxHits(maxHits), tenantQuotas: [] }) as unknown as CallerKey
  // One key edited through twelve month-long windows: each count lives on, yet only 5 windows are kept.
  for (let count = 1; count <= 12; count++) await limits.consume(caller(1, `${count}/1Mon`))
  t.equal(limits.windows, 5, 'at most 5 windows')
  // The newest window kept its count: its one point is spent.
  t.equal((await limits.consume(caller(1, '12/1Mon')))!.remaining, 10, 'the newest window still counts')
  now += 31 * 86_400_000
  await limits.consume(caller(2, '1/1Sec'))
  t.equal(limits.windows, 1, 'windows whose counts all expired are dropped before a new one is made')
})

t.test('a window no key counts in any more is dropped when a new one is made, on every database', async (t) => {
  await forEachDatabase(t, async (t, kind) => {
    let now = Date.now()
    const service = await startService(t, { kind, clock: () => now })
    // Thirty distinct one-second windows (as one key edited thirty times would leave).
    for (let count = 1; count <= 30; count++) {
      const answer = await service.call('GET', '/Api/Read/Acl', { key: await insertKey(service, { max_hits: `${count}/1Sec` }) })
      t.equal(answer.status, 200, 'answered')
    }
    t.equal(service.kernel.cacheSizes().rateCounts, 30, 'one count in each window')
    now += 2000
    const later = await service.call('GET', '/Api/Read/Acl', { key: await insertKey(service, { max_hits: '31/1Sec' }) })
    t.equal(later.status, 200)
    t.equal(service.kernel.cacheSizes().rateCounts, 1, 'the expired windows went, with their counts')
  })
})

t.test('per-key memories stay within their bounds after more distinct keys than they hold', async (t) => {
  await forEachDatabase(t, async (t, kind) => {
    const defaults = loadConfig({}, {})
    const service = await startService(t, { kind, config: { cache: { ...defaults.cache, maxEntries } } })
    const keys = []
    for (let index = 0; index < callers; index++) keys.push(await insertKey(service, { max_hits: '1000/1Hour,100000/1Mon' }))
    for (const key of keys) {
      const answer = await service.call('GET', '/Api/Read/Acl', { key })
      t.equal(answer.status, 200, 'answered')
      if (answer.status !== 200) break
    }
    const sizes = service.kernel.cacheSizes()
    t.ok(sizes.keys <= maxEntries, `loaded keys ${sizes.keys} <= ${maxEntries}`)
    t.ok(sizes.responses <= maxEntries, `cached answers ${sizes.responses} <= ${maxEntries}`)
    // The keys share their groups, so their ACL answers are the same bytes, kept once.
    t.equal(sizes.responseBodies, 1, `${sizes.responses} cached answers share one body`)
    // Two windows per key, each bounded (the bound itself is checked on a window above).
    t.ok(sizes.rateCounts <= 2 * rateCountsMax(maxEntries), `rate counts ${sizes.rateCounts} <= ${2 * rateCountsMax(maxEntries)}`)
    t.ok(sizes.rateCounts > 0, 'the calls were counted')
    // Each key's last proven signature is remembered apart from its record, never for more keys than are loaded.
    t.ok(sizes.signatures <= maxEntries && sizes.signatures > 0, `remembered signatures ${sizes.signatures} <= ${maxEntries}`)
    // The first key, long evicted everywhere, still calls and is loaded again.
    const again = await service.call('GET', '/Api/Read/Acl', { key: keys[0] })
    t.equal(again.status, 200, 'an evicted key is loaded again')
  })
})

t.test('a service on SQLite without Redis loads neither the MySQL driver nor the Redis client', async (t) => {
  // In a process of its own: this one may have loaded both for other tests.
  const script = `
    import { mkdtempSync, rmSync } from 'node:fs'
    import { createRequire } from 'node:module'
    import { tmpdir } from 'node:os'
    import { join } from 'node:path'
    const { loadConfig } = await import('./kernel/boot/config.ts')
    const { createKernel } = await import('./kernel/boot/kernel.ts')
    const { silentLogger } = await import('./kernel/observe/logger.ts')
    const dataDir = mkdtempSync(join(tmpdir(), 'kg-footprint-'))
    const kernel = await createKernel({ config: loadConfig({}, { DATA_DIR: dataDir, PORT: '0' }), logger: silentLogger() })
    await kernel.listen()
    const loaded = Object.keys(createRequire(import.meta.url).cache)
    console.log(JSON.stringify(['better-sqlite3', 'mysql2', 'ioredis'].map((name) => loaded.some((path) => path.includes('/node_modules/' + name + '/')))))
    await kernel.close()
    rmSync(dataDir, { recursive: true, force: true })
  `
  const repository = resolve(dirname(fileURLToPath(import.meta.url)), '..')
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: repository, encoding: 'utf8' })
  t.equal(child.status, 0, child.stderr)
  t.same(JSON.parse(child.stdout.trim().split('\n').pop()!), [true, false, false], 'SQLite loaded; mysql2 and ioredis not')
})
