import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { purgeAudit } from './auditTrail.ts'

/** Audit records are kept `retentionDays` (config `audit.retentionDays`, one year by default). */
export const defaultAuditRetentionDays = 365

/** Deletes audit records past their retention in the background: shortly after start, then once an hour. */
export class AuditRetention {
  private first: NodeJS.Timeout | null = null
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

  /**
   * A first pass `firstAfterMs` after start, so a service restarted more often than
   * `everyMs` still purges (not at once: a start, or an operator CLI run, has other work
   * first), then one every `everyMs`. Neither timer keeps the process alive.
   */
  start(everyMs: number, report: (error: unknown) => void, firstAfterMs = 10_000): void {
    const pass = () => void this.purge().catch(report)
    this.first = setTimeout(pass, firstAfterMs)
    this.first.unref()
    this.timer = setInterval(pass, everyMs)
    this.timer.unref()
  }

  stop(): void {
    if (this.first) clearTimeout(this.first)
    if (this.timer) clearInterval(this.timer)
  }
}
