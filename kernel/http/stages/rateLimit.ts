import type { Stage } from '../pipeline.ts'
import { ApiError, refused } from '../errors.ts'
import type { Exchange } from '../exchange.ts'
import { rateLimitHeaders, type RateDecision, type RateLimits } from '../../limits/rateLimits.ts'

/**
 * D7: one point per call in each MaxHits window; 429 with Retry-After when any is spent.
 * After the answer: the IETF RateLimit fields of the tightest window, on every answer
 * of a key with limits (errors included).
 */
export function rateLimitStage(rateLimits: RateLimits): Stage {
  function decide(exchange: Exchange, decision: RateDecision | null): void {
    exchange.rate = decision
    if (decision && !decision.allowed) {
      const headers: Record<string, string> = { 'Retry-After': String(Math.max(1, Math.ceil(decision.resetMs / 1000))) }
      // A tenant-wide quota (issue 16) says so: the key's own windows may still have room.
      const which = decision.quota === null ? 'Rate limit' : 'Tenant rate limit'
      throw refused(new ApiError('TOO_MANY_REQUESTS', `${which} exceeded (${decision.window.count}/${decision.window.label})`, headers), 'rate_limit')
    }
  }

  return {
    name: 'rate-limit',
    run(exchange) {
      if (exchange.caller.rateWindows.length === 0 && exchange.caller.tenantQuotas.length === 0) return
      // Counted in this process: decided at once, no promise (rateLimits.consumeNow).
      const now = rateLimits.consumeNow(exchange.caller)
      if (now !== undefined) return decide(exchange, now)
      return rateLimits.consume(exchange.caller).then((decision) => decide(exchange, decision))
    },
    after(exchange) {
      if (exchange.rate !== null) exchange.answer!.headers.push(...rateLimitHeaders(exchange.rate))
    },
  }
}
