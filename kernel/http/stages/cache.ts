import type { Stage } from '../pipeline.ts'
import type { ResponseCache } from '../responseCache.ts'
import { bodyBytes } from '../bodyPieces.ts'

/**
 * Serves a route's cached answer when its policy allows (after authentication, ACL and
 * rate limit, so a cached answer is never given to someone who may not have it), and
 * keeps the handler's successful answer for the next such call.
 */
export function cacheStage(cache: ResponseCache): Stage {
  return {
    name: 'cache',
    run(exchange) {
      const policy = exchange.mounted.route.cache
      if (!policy) return
      const variant = `${exchange.format}\u0000${exchange.queryString}\u0000${exchange.rawBody === undefined ? '' : exchange.rawBody.toString('latin1')}`
      const key = cache.key(exchange.mounted.id, policy.partition(exchange), variant)
      exchange.cacheKey = key
      exchange.cacheEpoch = cache.epoch
      const hit = cache.get(key)
      if (!hit) return
      exchange.answer = { status: hit.status, body: hit.body, contentType: hit.contentType, headers: hit.headers.concat([['X-Cache', 'HIT']]) }
      exchange.fromCache = true
    },
    after(exchange) {
      const answer = exchange.answer!
      const policy = exchange.mounted.route.cache
      // Only the handler's own answer: not a hit, not an error.
      if (exchange.cacheKey === null || !policy || exchange.result === undefined || answer.status !== 200) return
      cache.set(exchange.cacheKey, { ...answer, body: bodyBytes(answer.body), headers: answer.headers.slice() }, policy.ttlSeconds, exchange.cacheEpoch)
    },
  }
}
