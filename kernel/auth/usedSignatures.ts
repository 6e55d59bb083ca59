import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { isUniqueViolation } from '../storage/database.ts'
import type { LimiterFactory, WindowLimiter } from '../limits/rateLimits.ts'

/**
 * Where the signatures of writes already made are remembered, each for `windowMs`
 * (issue 12 item 4): `firstUse` is true the first time, false for a replay.
 */
export interface UsedSignatures {
  firstUse(keyId: number, signature: string, windowMs: number): Promise<boolean>
}

/**
 * In the limiter store, as a window of one point per signature: with Redis, shared by
 * every process and kept across their restarts (entries expire with the window).
 */
export function limiterSignatures(limiterStore: LimiterFactory): UsedSignatures {
  const limiters = new Map<number, WindowLimiter>()
  const limiterFor = (windowMs: number) => {
    const seconds = Math.max(1, Math.ceil(windowMs / 1000))
    let limiter = limiters.get(seconds)
    if (limiter === undefined) {
      limiter = limiterStore({ points: 1, duration: seconds, keyPrefix: `replay-${seconds}` })
      limiters.set(seconds, limiter)
    }
    return limiter
  }
  return {
    firstUse: (keyId, signature, windowMs) => limiterFor(windowMs).consume(`${keyId}:${signature}`).then(() => true, () => false),
  }
}

/**
 * In the database, one row per signature (the primary key makes two racing uses one):
 * without Redis, every process on the database refuses a replay, a restart forgets
 * none, and nothing of it is held in memory. Only writes pay the insert; reads stay
 * replayable and never come here. Expired rows are purged in the background.
 */
export class DatabaseSignatures implements UsedSignatures {
  private purgeTimer: NodeJS.Timeout | null = null

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly clock: () => number,
  ) {}

  async firstUse(keyId: number, signature: string, windowMs: number): Promise<boolean> {
    if (await this.claim(keyId, signature, windowMs)) return true
    // Used before: a replay, unless that use has expired and not been purged yet.
    const expired = await this.db.deleteFrom('api_used_signatures')
      .where('key_id', '=', keyId).where('signature', '=', signature).where('expires_at', '<=', this.clock()).executeTakeFirst()
    return Number(expired.numDeletedRows) > 0 && (await this.claim(keyId, signature, windowMs))
  }

  private async claim(keyId: number, signature: string, windowMs: number): Promise<boolean> {
    try {
      await this.db.insertInto('api_used_signatures').values({ key_id: keyId, signature, expires_at: this.clock() + windowMs }).execute()
      return true
    } catch (error) {
      if (isUniqueViolation(error)) return false
      throw error
    }
  }

  startPurging(everyMs: number, report: (error: unknown) => void): void {
    this.purgeTimer = setInterval(() => {
      this.db.deleteFrom('api_used_signatures').where('expires_at', '<=', this.clock()).execute().catch(report)
    }, everyMs)
    this.purgeTimer.unref()
  }

  stop(): void {
    if (this.purgeTimer) clearInterval(this.purgeTimer)
  }
}
