import { RateLimiterRes } from 'rate-limiter-flexible'
import type { Redis } from 'ioredis'
import { CountedRes, MemoryWindowLimiter, type LimiterFactory, type WindowLimiter } from './rateLimits.ts'

/**
 * One count in one Redis window: SET NX with the window's expiry, then INCRBY, as
 * rate-limiter-flexible's RateLimiterRedis does, and also the window's end on Redis's
 * clock (TIME + PTTL), which names the window for a give-back.
 */
const countScript = `
redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX')
local consumed = redis.call('incrby', KEYS[1], ARGV[1])
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 then
  redis.call('expire', KEYS[1], ARGV[2])
  ttl = 1000 * ARGV[2]
end
local now = redis.call('time')
return {consumed, ttl, now[1] * 1000 + math.floor(now[2] / 1000) + ttl}
`

/**
 * A give-back: only to the window the point was taken in (its end within
 * ARGV[3] ms of ARGV[2]), only while it lasts, never below zero. Without this a point
 * given back just after the window expired made the next window start at -1 (it then
 * answered count + 1 calls), or freed a place in a window that other calls had opened.
 * (TIME before a write: Redis 5 or later, which replicates a script by its effects.)
 */
const giveBackScript = `
local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 then return 0 end
local now = redis.call('time')
local ends = now[1] * 1000 + math.floor(now[2] / 1000) + ttl
if math.abs(ends - tonumber(ARGV[2])) >= tonumber(ARGV[3]) then return 0 end
local consumed = tonumber(redis.call('get', KEYS[1]))
if consumed == nil or consumed <= 0 then return 0 end
redis.call('decrby', KEYS[1], math.min(consumed, tonumber(ARGV[1])))
return 1
`

/**
 * How far apart two ends of one window may be computed: the same window's end comes out
 * within a millisecond or two; the next window's is at least a whole window (1 s) later.
 */
const sameWindowMs = 500

interface WindowScripts {
  keygateWindowCount(key: string, points: number, seconds: number): Promise<[number, number, number]>
  keygateWindowGiveBack(key: string, points: number, windowEnd: number, sameWindowMs: number): Promise<number>
}

/**
 * Windows shared by every process through Redis (D16). Each consume is one Lua script
 * (SET NX with the window's expiry, then INCRBY): atomic, so a `10/1Min` key gets
 * exactly 10 calls across all processes, and the window is FIXED from its first call
 * (D7) because only the NX set gives it an expiry. A 1Mon window is a 30-day Redis
 * expiry, no timer in this process. A give-back is a script too, bound to the window
 * the point was taken in (see giveBackScript).
 *
 * While Redis does not answer (no queuing, no waiting: a command is not even sent
 * unless the connection is ready) the window falls back to this process's own
 * MemoryWindowLimiter: calls keep being answered, counted per process. Not
 * rate-limiter-flexible's `insuranceLimiter` option, which must be one of its own
 * limiter classes, and RateLimiterMemory cannot hold a 1Mon window (see rateLimits.ts);
 * the fallback below is the same idea.
 */
export function redisLimiters(client: Redis, clock: () => number = Date.now, prefix = 'keygate'): LimiterFactory {
  client.defineCommand('keygateWindowCount', { numberOfKeys: 1, lua: countScript })
  client.defineCommand('keygateWindowGiveBack', { numberOfKeys: 1, lua: giveBackScript })
  return (options) => {
    const shared = new RedisWindowLimiter(client as Redis & WindowScripts, `${prefix}:${options.keyPrefix}`, options.points, options.duration)
    const local = new MemoryWindowLimiter(options.points, options.duration * 1000, clock)
    return withFallback(shared, local)
  }
}

const notReady = () => Promise.reject(new Error('Redis connection is not ready'))

/** One window in Redis; its keys are `<prefix>:<key>`, as rate-limiter-flexible named them. */
class RedisWindowLimiter implements WindowLimiter {
  constructor(private readonly client: Redis & WindowScripts, private readonly prefix: string, private readonly points: number, private readonly seconds: number) {}

  consume(key: string | number, points = 1): Promise<RateLimiterRes> {
    if (this.client.status !== 'ready') return notReady()
    return this.client.keygateWindowCount(`${this.prefix}:${key}`, points, this.seconds).then(([consumed, ttl, windowEnd]) => {
      const result = new CountedRes(Math.max(0, this.points - consumed), ttl, consumed, consumed === points, windowEnd, this)
      return consumed <= this.points ? result : Promise.reject(result)
    })
  }

  async giveBack(key: string | number, taken: RateLimiterRes, points = 1): Promise<void> {
    if (!(taken instanceof CountedRes) || taken.countedBy !== this) return
    if (this.client.status !== 'ready') return notReady()
    await this.client.keygateWindowGiveBack(`${this.prefix}:${key}`, points, taken.windowEnd, sameWindowMs)
  }

  async get(key: string | number): Promise<RateLimiterRes | null> {
    if (this.client.status !== 'ready') return notReady()
    const name = `${this.prefix}:${key}`
    const replies = await this.client.multi().get(name).pttl(name).exec()
    const [[countError, count], [ttlError, ttl]] = replies as [[Error | null, string | null], [Error | null, number]]
    if (countError || ttlError) throw countError ?? ttlError
    if (count === null) return null
    const consumed = Number(count)
    return new RateLimiterRes(Math.max(0, this.points - consumed), ttl, consumed, false)
  }
}

/** A RateLimiterRes rejection is an answer (window spent); any other error means the store is away. */
function withFallback(shared: WindowLimiter, local: MemoryWindowLimiter): WindowLimiter {
  const storeAway = (error: unknown) => !(error instanceof RateLimiterRes)
  return {
    consume: (key, points) => shared.consume(key, points).catch((error) => (storeAway(error) ? local.consume(key, points) : Promise.reject(error))),
    // Each point goes back where it was counted. A point Redis holds while Redis is away
    // stays there: that window answers one call fewer, never one more.
    giveBack: (key, taken, points) => (taken instanceof CountedRes && taken.countedBy === local
      ? local.giveBack(key, taken, points)
      : shared.giveBack(key, taken, points).catch(() => {})),
    get: (key) => shared.get(key).catch((error) => (storeAway(error) ? local.get(key) : Promise.reject(error))),
  }
}
