import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { firstIdAt } from './requestId.ts'

export interface RetentionOptions {
  detailDays: number
  recordDays: number
  purgeEveryMs: number
  purgeBatch: number
}

/**
 * How long the call log keeps what (D8): details for LogRaw days (never beyond
 * `detailDays`), whole records `recordDays`; purged in the background in small batches.
 */
export class CallLogRetention {
  private purgeTimer: NodeJS.Timeout | null = null
  private purging: Promise<{ detailsCleared: number; recordsDeleted: number }> | null = null
  private closed = false

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly options: RetentionOptions,
    private readonly clock: () => number,
    private readonly report: (error: unknown) => void,
  ) {}

  /** Retention of details for one record: LogRaw days (0 = the default), never beyond the bound. */
  detailUntil(requestTime: number, logRaw: number): number {
    const days = logRaw > 0 ? Math.min(logRaw, this.options.detailDays) : this.options.detailDays
    return requestTime + days * 86_400_000
  }

  startPurging(): void {
    this.purgeTimer = setInterval(() => void this.purge().catch(this.report), this.options.purgeEveryMs)
    this.purgeTimer.unref()
  }

  /**
   * One retention pass (D8): clears expired details, then deletes expired records.
   * Each statement touches at most `purgeBatch` rows found through an index (detail_until,
   * or the primary key whose ids grow with time), so no statement holds the table for
   * long, and calls are served between batches. Error messages (4xx/5xx answers) are
   * not details: they stay as long as their record.
   */
  async purge(): Promise<{ detailsCleared: number; recordsDeleted: number }> {
    if (this.purging) return this.purging
    this.purging = this.purgeBatches().finally(() => {
      this.purging = null
    })
    return this.purging
  }

  private async purgeBatches(): Promise<{ detailsCleared: number; recordsDeleted: number }> {
    const now = this.clock()
    const batch = this.options.purgeBatch
    let detailsCleared = 0
    let recordsDeleted = 0
    for (;;) {
      const rows = await this.db.selectFrom('api_log').select('id')
        .where('detail_until', '>', 0).where('detail_until', '<=', now)
        .orderBy('detail_until').limit(batch).execute()
      if (rows.length === 0) break
      await this.db.updateTable('api_log')
        .set((eb) => ({
          request_url: null,
          http_user_agent: null,
          raw_request: null,
          response: eb.case().when('response_code', '>=', 400).then(eb.ref('response')).else(null).end(),
          response_digest: null,
          detail_until: 0,
        }))
        .where('id', 'in', rows.map((row) => row.id)).execute()
      detailsCleared += rows.length
      if (rows.length < batch || this.closed) break
      await betweenBatches()
    }
    // Shared answers (sharedAnswers.ts) no record may show any more. The condition is
    // repeated in the delete: a batch written meanwhile may have kept a text longer.
    for (;;) {
      if (this.closed) break
      const texts = await this.db.selectFrom('api_log_body').select('digest')
        .where('keep_until', '<=', now).orderBy('keep_until').limit(batch).execute()
      if (texts.length === 0) break
      await this.db.deleteFrom('api_log_body').where('digest', 'in', texts.map((text) => text.digest)).where('keep_until', '<=', now).execute()
      if (texts.length < batch) break
      await betweenBatches()
    }
    const oldest = firstIdAt(now - this.options.recordDays * 86_400_000)
    for (;;) {
      const rows = await this.db.selectFrom('api_log').select('id').where('id', '<', oldest).orderBy('id').limit(batch).execute()
      if (rows.length === 0) break
      await this.db.deleteFrom('api_log').where('id', 'in', rows.map((row) => row.id)).execute()
      recordsDeleted += rows.length
      if (rows.length < batch || this.closed) break
      await betweenBatches()
    }
    return { detailsCleared, recordsDeleted }
  }

  /** Stops purging; a purge under way stops after its current batch, before the database closes. */
  async close(): Promise<void> {
    this.closed = true
    if (this.purgeTimer) clearInterval(this.purgeTimer)
    await this.purging?.catch(() => undefined)
  }
}

/** Lets the event loop serve calls between two purge batches. */
function betweenBatches(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}
