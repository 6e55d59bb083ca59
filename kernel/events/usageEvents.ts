import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import type { CallerKey, TenantQuota } from '../plugin.ts'
import type { RateWindow } from '../limits/maxHits.ts'
import { httpDate } from '../auth/apiDate.ts'
import type { EventBus, KernelEvent } from './events.ts'

/** The shares of a window or of credits that are told (issue 17): 80 % and 100 %. */
const thresholds = [80, 100] as const

/** The count at which `percent` of `limit` is used. */
export function thresholdCount(limit: number, percent: number): number {
  return Math.ceil((limit * percent) / 100)
}

/** What this process already told, so a busy key does not ask the database again every call. */
const rememberedMax = 10_000

/**
 * `key.usage` (issue 17): a key's MaxHits window, its tenant's quota or its credits
 * crossing 80 % and 100 %, once per window. The counters notice the crossing (one
 * comparison per call, only while someone subscribes) and hand it here; the event is
 * written in a small transaction of its own, off the call's path. Its `once` (key or
 * tenant, window, window start, threshold) makes it one event however many processes
 * share the counter.
 */
export class UsageEvents {
  private readonly told = new Set<string>()

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly events: EventBus,
    private readonly clock: () => number,
  ) {}

  private tell(event: KernelEvent): void {
    if (this.told.has(event.once!)) return
    if (this.told.size >= rememberedMax) this.told.clear()
    this.told.add(event.once!)
    void this.events.emitAlone(event).then((written) => written || this.told.delete(event.once!))
  }

  /**
   * A counted call brought a window to `used` calls; told when that is exactly a
   * threshold (each call moves a count by one, so exactly one call sees it).
   */
  counted(caller: CallerKey, window: RateWindow, quota: TenantQuota | null, used: number, resetMs: number): void {
    const percent = used === window.count ? 100 : used === thresholdCount(window.count, 80) ? 80 : 0
    if (percent === 0) return
    const resetAt = this.clock() + resetMs
    // The window's start, to the second: the same on every process sharing the counter.
    const start = Math.round((resetAt - window.seconds * 1000) / 1000)
    const scope = quota === null ? { parent: caller.parent, custno: caller.custno } : { parent: quota.parent, custno: quota.custno }
    const subject = quota === null ? `key:${caller.id}` : `tenant:${quota.parent}:${quota.custno}`
    this.tell({
      type: 'key.usage',
      ...scope,
      data: {
        KeyId: caller.id, Name: caller.displayName, Parent: caller.parent, Custno: caller.custno,
        Limit: quota === null ? 'MaxHits' : 'Tenant', Window: window.label, Count: window.count, Used: used, Percent: percent, ResetDate: httpDate(resetAt),
        ...(quota === null ? {} : { Tenant: { Parent: quota.parent, Custno: quota.custno } }),
      },
      once: `key.usage:${subject}:${window.count}/${window.label}:${start}:${percent}`,
    })
  }

  /**
   * A key spent credits. Read back after the spend, off the call's path: with a Refill
   * the window is the refill period and 100 % is its Amount; without one only running
   * out is told, once per setting of the count (the key's last change).
   */
  async spent(keyId: number): Promise<void> {
    const row = await this.db.selectFrom('api_keys')
      .select(['id', 'display_name', 'parent', 'custno', 'credits', 'refill_amount', 'refill_every', 'refill_at', 'updated_at'])
      .where('id', '=', keyId).executeTakeFirst()
    if (!row || row.credits === null) return
    const left = Number(row.credits)
    const total = row.refill_amount === null ? null : Number(row.refill_amount)
    for (const percent of thresholds) {
      const reached = total === null ? percent === 100 && left <= 0 : total - left >= thresholdCount(total, percent)
      if (!reached) continue
      const window = total === null ? `set:${Number(row.updated_at)}` : `refill:${Number(row.refill_at)}`
      this.tell({
        type: 'key.usage',
        parent: Number(row.parent),
        custno: Number(row.custno),
        data: {
          KeyId: Number(row.id), Name: row.display_name, Parent: Number(row.parent), Custno: Number(row.custno),
          Limit: 'Credits', Left: left, Count: total, Percent: percent,
          ResetDate: row.refill_at === null ? null : httpDate(Number(row.refill_at)),
        },
        once: `key.usage:credits:${row.id}:${window}:${percent}`,
      })
    }
  }
}
