import type { Stage } from '../pipeline.ts'
import type { ResponseCache } from '../responseCache.ts'
import type { Exchange } from '../exchange.ts'

/**
 * Serves a route's cached answer when its policy allows (after authentication, ACL and
 * rate limit, so a cached answer is never given to someone who may not have it).
 */
export function cacheLookupStage(cache: ResponseCache): Stage {
  return {
    name: 'cache',
    run(exchange: Exchange) {
      const policy = exchange.mounted.route.cache
      if (!policy) return
      const variant = `${exchange.format}\u0000${exchange.queryString}\u0000${exchange.rawBody === undefined ? '' : exchange.rawBody.toString('latin1')}`
      const key = cache.key(exchange.mounted.id, policy.partition(exchange as never), variant)
      exchange.cacheKey = key
      const hit = cache.get(key)
      if (hit) exchange.answer = { status: hit.status, body: hit.body, contentType: hit.contentType, headers: hit.headers.concat([['X-Cache', 'HIT']]) }
    },
  }
}
