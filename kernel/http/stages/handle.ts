import type { Stage } from '../pipeline.ts'
import type { ResponseCache } from '../responseCache.ts'
import type { Exchange } from '../exchange.ts'
import { encode } from '../encoders.ts'

/** Runs the plugin's handler, encodes its answer in the call's format, and caches it when the route says so. */
export function handleStage(cache: ResponseCache): Stage {
  function finish(exchange: Exchange, result: unknown): void {
    const route = exchange.mounted.route
    exchange.result = result
    const rows = exchange.format === 'csv' && route.csv ? route.csv(result, exchange as never) : undefined
    const encoded = encode(result, exchange.format, route, rows)
    exchange.answer = { status: encoded.status ?? 200, body: encoded.body, contentType: encoded.contentType, headers: exchange.extraHeaders }
    if (exchange.cacheKey !== null && route.cache) {
      cache.set(exchange.cacheKey, { ...exchange.answer, headers: exchange.extraHeaders.slice() }, route.cache.ttlSeconds)
    }
  }
  return {
    name: 'handler',
    run(exchange) {
      const result = exchange.mounted.route.handler(exchange as never)
      if (result instanceof Promise) return result.then((value) => finish(exchange, value))
      finish(exchange, result)
    },
  }
}
