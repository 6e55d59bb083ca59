import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible'
import type { RateWindow } from './maxHits.ts'
import type { CallerKey, WindowStatus } from './plugin.ts'

/**
 * The limiter store seam (issue: rate limits). Today one in-memory limiter per distinct
 * window, shared by all keys that use that window; a shared store (rate-limiter-flexible's
 * MySQL/Redis limiters with an in-memory insurance limiter) slots in behind `limiterFor`.
 */
export interface RateDecision {
  allowed: boolean
  /** The exceeded window when refused; otherwise the tightest one. */
  window: RateWindow
  remaining: number
  resetMs: number
}

export class RateLimits {
  private readonly limiters = new Map<string, RateLimiterMemory>()
  // Wrong day codes (D5) count here as well as on MaxHits, so guessing stays slow
  // even for a key without MaxHits.
  private readonly dayCodeFailures = new RateLimiterMemory({ points: 10, duration: 60, keyPrefix: 'daycode' })

  private limiterFor(window: RateWindow): RateLimiterMemory {
    const name = `${window.count}/${window.seconds}`
    let limiter = this.limiters.get(name)
    if (!limiter) {
      limiter = new RateLimiterMemory({ points: window.count, duration: window.seconds, keyPrefix: name })
      this.limiters.set(name, limiter)
    }
    return limiter
  }

  /** Consumes one call in every window of the key; refused if any window is exceeded. */
  async consume(caller: CallerKey): Promise<RateDecision | null> {
    const windows = caller.rateWindows
    if (windows.length === 0) return null
    let tightest: RateDecision | null = null
    let refused: RateDecision | null = null
    for (const window of windows) {
      let result: RateLimiterRes
      let allowed = true
      try {
        result = await this.limiterFor(window).consume(caller.id)
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection
        result = rejection
        allowed = false
      }
      const decision = { allowed, window, remaining: result.remainingPoints, resetMs: result.msBeforeNext }
      if (!allowed && (!refused || decision.resetMs > refused.resetMs)) refused = decision
      if (!tightest || decision.remaining < tightest.remaining) tightest = decision
    }
    return refused ?? tightest
  }

  /** A wrong day code: true when the key has now guessed too often. */
  async dayCodeFailed(caller: CallerKey): Promise<boolean> {
    try {
      await this.dayCodeFailures.consume(caller.id)
      return false
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection
      return true
    }
  }

  async dayCodeBlocked(caller: CallerKey): Promise<number> {
    const state = await this.dayCodeFailures.get(caller.id)
    return state && state.consumedPoints >= 10 ? state.msBeforeNext : 0
  }

  /** Per-window state without consuming (GET /api/read/limits). */
  async status(caller: CallerKey, now = Date.now()): Promise<WindowStatus[]> {
    const result: WindowStatus[] = []
    for (const window of caller.rateWindows) {
      const state = await this.limiterFor(window).get(caller.id)
      result.push({
        window,
        remaining: state ? Math.max(0, window.count - state.consumedPoints) : window.count,
        resetAt: now + (state ? Math.max(0, state.msBeforeNext) : window.seconds * 1000),
      })
    }
    return result
  }
}

/** IETF RateLimit header fields for the tightest window (D7). */
export function rateLimitHeaders(decision: RateDecision): [string, string][] {
  const resetSeconds = Math.max(0, Math.ceil(decision.resetMs / 1000))
  return [
    ['RateLimit-Policy', `${decision.window.count};w=${decision.window.seconds}`],
    ['RateLimit', `limit=${decision.window.count}, remaining=${decision.remaining}, reset=${resetSeconds}`],
  ]
}
