import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { isUniqueViolation } from '../storage/database.ts'

/**
 * Where the signatures of writes already made are remembered, each for `windowMs`
 * (issue 12 item 4): `firstUse` is true the first time, false for a replay.
 */
export interface UsedSignatures {
  firstUse(keyId: number, signature: string, windowMs: number): Promise<boolean>
}

/**
 * In the database, one row per signature (the primary key makes two racing uses one):
 * every process on the database refuses a replay, a restart forgets none, and nothing
 * of it is held in memory. Also with Redis: a memory kept there would fall back to one
 * process's while Redis is away, and miss what was used meanwhile once it returns.
 * Only writes pay the insert; reads stay replayable and never come here. Expired rows
 * are purged in the background.
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
