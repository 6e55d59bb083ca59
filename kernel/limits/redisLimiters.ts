import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible'
import type { Redis } from 'ioredis'
import { MemoryWindowLimiter, type LimiterFactory, type WindowLimiter } from './rateLimits.ts'

/**
 * Windows shared by every process through Redis (D16). Each consume is one Lua script
 * (SET NX with the window's expiry, then INCRBY): atomic, so a `10/1Min` key gets
 * exactly 10 calls across all processes, and the window is FIXED from its first call
 * (D7) because only the NX set gives it an expiry. A 1Mon window is a 30-day Redis
 * expiry, no timer in this process.
 *
 * While Redis does not answer (rejectIfRedisNotReady: no queuing, no waiting) the
 * window falls back to this process's own MemoryWindowLimiter: calls keep being
 * answered, counted per process. Not rate-limiter-flexible's `insuranceLimiter`
 * option, which must be one of its own limiter classes, and RateLimiterMemory cannot
 * hold a 1Mon window (see rateLimits.ts); the fallback below is the same idea.
 */
export function redisLimiters(client: Redis, clock: () => number = Date.now, prefix = 'keygate'): LimiterFactory {
  return (options) => {
    const shared = new RateLimiterRedis({
      storeClient: client,
      points: options.points,
      duration: options.duration,
      keyPrefix: `${prefix}:${options.keyPrefix}`,
      rejectIfRedisNotReady: true,
    })
    const local = new MemoryWindowLimiter(options.points, options.duration * 1000, clock)
    return withFallback(shared, local)
  }
}

/** A RateLimiterRes rejection is an answer (window spent); any other error means the store is away. */
function withFallback(shared: WindowLimiter, local: WindowLimiter): WindowLimiter {
  const storeAway = (error: unknown) => !(error instanceof RateLimiterRes)
  return {
    consume: (key, points) => shared.consume(key, points).catch((error) => (storeAway(error) ? local.consume(key, points) : Promise.reject(error))),
    reward: (key, points) => shared.reward(key, points).catch((error) => (storeAway(error) ? local.reward(key, points) : Promise.reject(error))),
    get: (key) => shared.get(key).catch((error) => (storeAway(error) ? local.get(key) : Promise.reject(error))),
  }
}
