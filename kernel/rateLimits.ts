import { RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible'
import type { RateWindow } from './maxHits.ts'
import type { CallerKey, WindowStatus } from './plugin.ts'

/**
 * The limiter store seam (D7). Every window of every key is counted by a
 * rate-limiter-flexible limiter made by a `LimiterFactory`. Today the factory makes
 * in-memory limiters (one process). Several processes share counts by passing a
 * factory that makes store limiters instead, e.g.
 *
 *   (options) => new RateLimiterMySQL({ ...options, storeClient: pool, tableName: 'rate_limits',
 *                                       insuranceLimiter: new RateLimiterMemory(options) })
 *
 * (or RateLimiterRedis with the same insurance limiter), so an unreachable store
 * degrades to per-process counting instead of refusing every call.
 */
export type LimiterFactory = (options: { points: number; duration: number; keyPrefix: string }) => RateLimiterAbstract

export const inMemoryLimiters: LimiterFactory = (options) => new RateLimiterMemory(options)

export interface RateDecision {
  allowed: boolean
  /** The exceeded window when refused; otherwise the tightest one (fewest calls left). */
  window: RateWindow
  remaining: number
  resetMs: number
  /** `RateLimit-Policy` value of `window`, made once per window. */
  policy: string
  /** The quoted policy name that starts the `RateLimit` value, made once per window. */
  policyName: string
}

/** One window's limiter and the parts of its header that never change. */
interface WindowCounter {
  limiter: RateLimiterAbstract
  policy: string
  policyName: string
}

const dayCodeGuesses = 10

export class RateLimits {
  /** By window value (count and length): keys with the same window share one limiter. */
  private readonly counters = new Map<string, WindowCounter>()
  /**
   * By window object: a key's windows are parsed once when its record is loaded, so
   * the hot path finds its counter without building a lookup string per call.
   */
  private readonly countersByWindow = new WeakMap<RateWindow, WindowCounter>()
  // Wrong day codes (D5) count here as well as on MaxHits, so guessing stays slow
  // even for a key without MaxHits.
  private readonly dayCodeFailures: RateLimiterAbstract

  constructor(private readonly makeLimiter: LimiterFactory = inMemoryLimiters) {
    this.dayCodeFailures = makeLimiter({ points: dayCodeGuesses, duration: 60, keyPrefix: 'daycode' })
  }

  private counterFor(window: RateWindow): WindowCounter {
    let counter = this.countersByWindow.get(window)
    if (counter) return counter
    const name = `${window.count}/${window.seconds}`
    counter = this.counters.get(name)
    if (!counter) {
      counter = {
        limiter: this.makeLimiter({ points: window.count, duration: window.seconds, keyPrefix: `maxhits:${name}` }),
        policy: `"${window.label}";q=${window.count};w=${window.seconds}`,
        policyName: `"${window.label}"`,
      }
      this.counters.set(name, counter)
    }
    this.countersByWindow.set(window, counter)
    return counter
  }

  /**
   * Counts one call in every window of the key. Refused when any window is spent;
   * a refused call is then given back to the windows that had room, so hammering a
   * spent 1Sec window does not also eat the key's 1Hour allowance.
   */
  async consume(caller: CallerKey): Promise<RateDecision | null> {
    const windows = caller.rateWindows
    if (windows.length === 0) return null
    let tightest: RateDecision | null = null
    let refused: RateDecision | null = null
    let spared: RateLimiterAbstract[] | null = null
    for (let index = 0; index < windows.length; index++) {
      const window = windows[index]
      const counter = this.counterFor(window)
      let result: RateLimiterRes
      let allowed = true
      try {
        result = await counter.limiter.consume(caller.id)
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection
        result = rejection
        allowed = false
      }
      const decision: RateDecision = {
        allowed, window, remaining: result.remainingPoints, resetMs: result.msBeforeNext, policy: counter.policy, policyName: counter.policyName,
      }
      if (allowed && windows.length > 1) (spared ??= []).push(counter.limiter)
      // Of several spent windows, the one that frees up last decides Retry-After.
      if (!allowed && (!refused || decision.resetMs > refused.resetMs)) refused = decision
      if (!tightest || decision.remaining < tightest.remaining) tightest = decision
    }
    if (refused && spared) for (const limiter of spared) await limiter.reward(caller.id, 1)
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
    return state && state.consumedPoints >= dayCodeGuesses ? state.msBeforeNext : 0
  }

  /** Per-window state without consuming (GET /api/read/limits). */
  async status(caller: CallerKey, now = Date.now()): Promise<WindowStatus[]> {
    const result: WindowStatus[] = []
    for (const window of caller.rateWindows) {
      const state = await this.counterFor(window).limiter.get(caller.id)
      const live = state !== null && state.msBeforeNext > 0
      result.push({
        window,
        remaining: live ? Math.max(0, window.count - state.consumedPoints) : window.count,
        // A window not yet opened resets a full window after its first call.
        resetAt: now + (live ? state.msBeforeNext : window.seconds * 1000),
      })
    }
    return result
  }
}

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers) for the decision's
 * window (D7): `RateLimit-Policy: "1Min";q=3;w=60` and `RateLimit: "1Min";r=2;t=41`,
 * q the quota, w the window in seconds, r the calls left, t the seconds until reset.
 */
export function rateLimitHeaders(decision: RateDecision): [string, string][] {
  const resetSeconds = Math.max(0, Math.ceil(decision.resetMs / 1000))
  return [
    ['RateLimit-Policy', decision.policy],
    ['RateLimit', `${decision.policyName};r=${Math.max(0, decision.remaining)};t=${resetSeconds}`],
  ]
}
