import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { purgeAudit } from './auditTrail.ts'

/** Audit records are kept `retentionDays` (config `audit.retentionDays`, one year by default). */
export const defaultAuditRetentionDays = 365

/** Deletes audit records past their retention in the background, once an hour. */
export class AuditRetention {
  private timer: NodeJS.Timeout | null = null

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly clock: () => number,
    private readonly retentionDays: number,
  ) {}

  /** One pass: every record older than the retention goes (returns how many). */
  purge(): Promise<number> {
    return purgeAudit(this.db, this.clock() - this.retentionDays * 86_400_000)
  }

  start(everyMs: number, report: (error: unknown) => void): void {
    this.timer = setInterval(() => void this.purge().catch(report), everyMs)
    this.timer.unref()
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer)
  }
}
