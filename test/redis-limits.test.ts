/**
 * A key's several windows counted in Redis under a burst (D7, D16): a refused call is
 * counted in no window, so a burst on a spent short window leaves the longer ones
 * holding only the answered calls, and the 429 still names the window that frees up
 * last. One service on SQLite: the database plays no part in counting. A point given
 * back goes to the window it was taken in only (the limiter itself, against Redis: the
 * window's end cannot be timed between a call's count and its give-back over HTTP).
 */
import t from 'tap'
import { Redis } from 'ioredis'
import { startService } from './helpers/service.ts'
import { insertKey } from './helpers/keys.ts'
import { redisServerUrl, withRedis } from './helpers/redis.ts'
import { redisLimiters } from '../kernel/limits/redisLimiters.ts'
import type { RateLimiterRes } from 'rate-limiter-flexible'

/** The Redis count of one key window, as the service keeps it (`keygate:maxhits:<count>/<seconds>:<key id>`). */
async function redisCount(redisUrl: string, window: string, keyId: number): Promise<number> {
  const keyPrefix = new URL(redisUrl).searchParams.get('keyPrefix') ?? ''
  const client = new Redis(redisServerUrl, { maxRetriesPerRequest: 0 })
  try {
    return Number(await client.get(`${keyPrefix}keygate:maxhits:${window}:${keyId}`))
  } finally {
    client.disconnect()
  }
}

t.test('a burst of refused calls over Redis uses up no longer window', async (t) => {
  await withRedis(t, 'shared Redis', async (t, redisUrl) => {
    const service = await startService(t, { kind: 'sqlite', config: { redisUrl } })
    t.equal(service.kernel.redisReachable(), true, 'counting in Redis')

    await t.test('5/1Min,20/1Mon called 200 times at once: 5 answers, and the month holds those 5 only', async (t) => {
      const key = await insertKey(service, { max_hits: '5/1Min,20/1Mon' })
      const answers = await Promise.all(Array.from({ length: 200 }, () => service.call('GET', '/Api/Read/Acl', { key })))
      const statuses: Record<number, number> = {}
      for (const answer of answers) statuses[answer.status] = (statuses[answer.status] ?? 0) + 1
      t.same(statuses, { 200: 5, 429: 195 })
      const texts = new Set(answers.filter((answer) => answer.status === 429).map((answer) => answer.text))
      t.same([...texts], ['Error: Rate limit exceeded (5/1Min)'], 'every refusal names the spent minute, none the month')
      t.equal(await redisCount(redisUrl, '5/60', key.id), 5, 'the minute holds the answered calls')
      t.equal(await redisCount(redisUrl, '20/2592000', key.id), 5, 'the month holds the answered calls, not the refused ones')
    })

    await t.test('three windows over 40 calls at once: each holds exactly the 10 answered', async (t) => {
      const key = await insertKey(service, { max_hits: '10/1Min,12/1Hour,14/1Mon' })
      const answers = await Promise.all(Array.from({ length: 40 }, () => service.call('GET', '/Api/Read/Acl', { key })))
      t.equal(answers.filter((answer) => answer.status === 200).length, 10)
      for (const window of ['10/60', '12/3600', '14/2592000']) t.equal(await redisCount(redisUrl, window, key.id), 10, window)
    })

    await t.test('of several spent windows the 429 still names the one that frees up last', async (t) => {
      const key = await insertKey(service, { max_hits: '1/1Min,1/1Hour' })
      t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200)
      const refused = await service.call('GET', '/Api/Read/Acl', { key })
      t.equal(refused.status, 429)
      t.equal(refused.text, 'Error: Rate limit exceeded (1/1Hour)')
      const retryAfter = Number(refused.headers.get('retry-after'))
      t.ok(retryAfter > 3500 && retryAfter <= 3600, `Retry-After ${retryAfter} is the hour's`)
      t.match(refused.headers.get('ratelimit'), /^"1Hour";r=0;t=\d+$/)
      t.equal(await redisCount(redisUrl, '1/3600', key.id), 1, 'the refusal was given back')
    })
  })
})

t.test('a point given back after its window ended reaches no later window (Redis)', async (t) => {
  await withRedis(t, 'shared Redis', async (t, redisUrl) => {
    const client = new Redis(redisUrl, { maxRetriesPerRequest: 0 })
    t.teardown(() => client.disconnect())
    await new Promise((resolve) => client.once('ready', resolve))
    const make = redisLimiters(client)
    // 1Sec windows (they end on their own, as a window does, in a second) and a 1Min one.
    const second = make({ points: 3, duration: 1, keyPrefix: 'giveback' })
    const minute = make({ points: 3, duration: 60, keyPrefix: 'giveback-minute' })
    const name = (key: string, prefix = 'giveback') => `keygate:${prefix}:${key}`
    const outcome = (key: string, limiter = second) => limiter.consume(key).then((result) => ({ result, allowed: true }), (result: RateLimiterRes) => ({ result, allowed: false }))
    /** Three answered, the fourth refused: its answer, the point a caller gives back. */
    const spend = async (key: string, limiter = second) => {
      const results = [await outcome(key, limiter), await outcome(key, limiter), await outcome(key, limiter), await outcome(key, limiter)]
      t.same(results.map((each) => each.allowed), [true, true, true, false])
      return results[3].result
    }
    const endWindow = async (key: string) => {
      while ((await client.exists(name(key))) === 1) await new Promise((resolve) => setTimeout(resolve, 5))
    }
    const answered = async (key: string, calls: number) => {
      let count = 0
      for (let call = 0; call < calls; call++) if ((await outcome(key)).allowed) count++
      return count
    }

    const refused = await spend('late')
    await endWindow('late')
    await second.giveBack('late', refused)
    t.equal(await client.get(name('late')), null, 'no window is opened by a late give-back (it made one at -1)')
    t.equal(await answered('late', 6), 3, 'the next window answers its count, not one more')

    const other = await spend('reopened')
    await endWindow('reopened')
    t.equal(await answered('reopened', 1), 1, 'another call opens the next window')
    await second.giveBack('reopened', other)
    t.equal(await client.get(name('reopened')), '1', 'that window keeps its call: the point was not taken there')
    t.equal(await answered('reopened', 5), 2, 'three answered in it in all')

    const timely = await spend('timely', minute)
    await minute.giveBack('timely', timely)
    t.equal(await client.get(name('timely', 'giveback-minute')), '3', 'within its window the refused call is given back')
    for (let again = 0; again < 4; again++) await minute.giveBack('timely', timely)
    t.equal(await client.get(name('timely', 'giveback-minute')), '0', 'and never below zero')
    const ttl = await client.pttl(name('timely', 'giveback-minute'))
    t.ok(ttl > 55_000 && ttl <= 60_000, 'the window keeps its end')
  })
})

t.test('over Redis the RateLimit fields name the window as the caller wrote it', async (t) => {
  await withRedis(t, 'shared Redis', async (t, redisUrl) => {
    const service = await startService(t, { kind: 'sqlite', config: { redisUrl } })
    const seconds = await insertKey(service, { max_hits: '7/60Sec' })
    const minute = await insertKey(service, { max_hits: '7/1Min' })
    for (const [key, label] of [[seconds, '60Sec'], [minute, '1Min'], [seconds, '60Sec']] as const) {
      const answer = await service.call('GET', '/Api/Read/Acl', { key })
      t.equal(answer.headers.get('ratelimit-policy'), `"${label}";q=7;w=60`, `${label}: its own name, whichever key counted first`)
    }
  })
})
