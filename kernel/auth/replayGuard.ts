import { defaultAllowMs } from './apiDate.ts'
import type { LimiterFactory, WindowLimiter } from '../limits/rateLimits.ts'
import type { CallerKey } from '../plugin.ts'

/** A signature is remembered this long at most; keys with a longer window (or none) are protected this long. */
export const longestReplayMemoryMs = 24 * 3_600_000

/**
 * Signatures one in-memory replay window remembers at most (issue 19: bounded memory,
 * about 150 MB at the worst). Past it the oldest are forgotten first: a replay is then
 * missed only if a million other writes came between the signature's use and its replay
 * inside the clock window.
 */
export const replayMemoryMax = 1_000_000

/**
 * The memory of signatures already used for a state-changing call (issue 12): a
 * second use within the key's clock window is a replay. Kept by the same limiter store
 * as the rate limits, as a window of one point per signature, so it is bounded in time
 * (entries expire with the window) and shared by every process that shares the limits
 * (the cluster primary today).
 */
export class ReplayGuard {
  private readonly limiters = new Map<number, WindowLimiter>()

  constructor(private readonly limiterStore: LimiterFactory) {}

  private limiterFor(windowMs: number): WindowLimiter {
    const seconds = Math.max(1, Math.ceil(windowMs / 1000))
    let limiter = this.limiters.get(seconds)
    if (limiter === undefined) {
      limiter = this.limiterStore({ points: 1, duration: seconds, keyPrefix: `replay-${seconds}` })
      this.limiters.set(seconds, limiter)
    }
    return limiter
  }

  /** True the first time this key uses this signature within its window; false for a replay. */
  firstUse(caller: CallerKey, signature: string): Promise<boolean> {
    const allowHours = caller.allowHours
    // The date may be that far on either side of now: a signature stays usable for twice the window.
    const windowMs = allowHours === 0 ? longestReplayMemoryMs : Math.min(longestReplayMemoryMs, 2 * (allowHours === null ? defaultAllowMs : allowHours * 3_600_000))
    return this.limiterFor(windowMs).consume(`${caller.id}:${signature.toLowerCase()}`).then(() => true, () => false)
  }
}
