import { defaultAllowMs } from './apiDate.ts'
import type { CallerKey } from '../plugin.ts'
import type { UsedSignatures } from './usedSignatures.ts'

/** A signature is remembered this long at most; keys with a longer window (or none) are protected this long. */
export const longestReplayMemoryMs = 24 * 3_600_000

/**
 * The memory of signatures already used for a state-changing call (issue 12): a
 * second use within the key's clock window is a replay. Kept where every process that
 * serves the key sees it: in the database, with Redis or without
 * (auth/usedSignatures.ts), so a restart or another process forgets none.
 */
export class ReplayGuard {
  constructor(private readonly used: UsedSignatures) {}

  /** True the first time this key uses this signature within its window; false for a replay. */
  firstUse(caller: CallerKey, signature: string): Promise<boolean> {
    const allowHours = caller.allowHours
    // The date may be that far on either side of now: a signature stays usable for twice the window.
    const windowMs = allowHours === 0 ? longestReplayMemoryMs : Math.min(longestReplayMemoryMs, 2 * (allowHours === null ? defaultAllowMs : allowHours * 3_600_000))
    return this.used.firstUse(caller.id, signature.toLowerCase(), windowMs)
  }
}
