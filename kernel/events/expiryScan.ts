import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import type { EventBus } from './events.ts'
import { keyExpiringEvent } from './keyEvents.ts'

const dayMs = 86_400_000
/** The warnings before a key's EndDate, widest first (issue 17: 7 days and 1 day). */
const warningDays = [7, 1] as const

/**
 * `key.expiring` (issue 17): every few moments, the keys whose EndDate is at most 7
 * days away. Each key gets its narrowest due warning (a key made to end in 12 hours
 * hears "1 day" only) once: the event's `once` makes a second process's, or a
 * restarted one's, notice of the same warning a no-op; this process also remembers
 * what it told, so it does not ask again every scan. A warning nobody wanted (no
 * webhook of its tenant subscribes) is not remembered: it is offered again at the
 * next scan, one offer per such tenant and scan, so a webhook that subscribes while
 * the warning is still due hears it then, as it would after a restart.
 */
export class ExpiryScan {
  private timer: NodeJS.Timeout | null = null
  private running: Promise<void> | null = null
  private readonly told = new Set<string>()

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly events: EventBus,
    private readonly clock: () => number,
    private readonly report: (error: unknown) => void,
  ) {}

  start(everyMs: number): void {
    this.timer = setInterval(() => void this.scanOnce(), everyMs)
    this.timer.unref()
    void this.scanOnce()
  }

  /** One scan (tests call it directly); a scan still running is not overlapped. */
  scanOnce(): Promise<void> {
    if (!this.events.subscribed) return Promise.resolve()
    this.running ??= this.scan().catch(this.report).finally(() => (this.running = null))
    return this.running
  }

  private async scan(): Promise<void> {
    const now = this.clock()
    const rows = await this.db
      .selectFrom('api_keys')
      .select(['id', 'display_name', 'parent', 'custno', 'end_date'])
      .where('end_date', '>', now)
      .where('end_date', '<=', now + warningDays[0] * dayMs)
      .execute()
    const due = new Set<string>()
    // Tenants whose warning nobody wanted in this scan: their other keys are not offered again until the next.
    const unwanted = new Set<string>()
    for (const row of rows) {
      const left = Number(row.end_date) - now
      const days = warningDays.filter((limit) => left <= limit * dayMs).at(-1)!
      const event = keyExpiringEvent(row, days)
      due.add(event.once!)
      const tenant = `${event.parent}:${event.custno}`
      if (this.told.has(event.once!) || unwanted.has(tenant)) continue
      const outcome = await this.events.emitAlone(event)
      // Told only when kept: a warning nobody wanted is offered again next scan, so a webhook made meanwhile hears it.
      if (outcome === 'kept') this.told.add(event.once!)
      else if (outcome === 'unwanted') unwanted.add(tenant)
    }
    // Forget what is no longer due (the key ended, or its EndDate moved).
    for (const once of this.told) if (!due.has(once)) this.told.delete(once)
  }

  stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    return this.running ?? Promise.resolve()
  }
}
