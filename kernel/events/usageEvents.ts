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
/** After a write that failed (the database is down or slow), no other is tried for this long. */
const retryQuietMs = 1000

/** A crossing to tell: its event, and its once key as what crossed (`base`) and the window's start. */
interface Crossing {
  event: KernelEvent
  base: string
  start: number
}

/**
 * Whether `base` is remembered for this window: the start is computed per call from the
 * counter's reset time, so it may differ by a rounding second between calls.
 */
function inWindow(remembered: Map<string, number>, base: string, start: number): boolean {
  const at = remembered.get(base)
  return at !== undefined && Math.abs(at - start) <= 1
}

/** Remembers a crossing's window start under its base; bounded (a full memory starts over). */
function remember(remembered: Map<string, number>, crossing: Crossing): void {
  if (remembered.size >= rememberedMax) remembered.clear()
  remembered.set(crossing.base, crossing.start)
}

/**
 * `key.usage` (issue 17): a key's MaxHits window, its tenant's quota or its credits
 * crossing 80 % and 100 %, once per window. The counters hand every counted call here
 * (only while someone subscribes); the call that brought the count to a threshold writes
 * the event, in a small transaction of its own, off the call's path. Its `once` (key or
 * tenant, window, window start, threshold) makes it one event however often it is tried:
 * a write that failed is tried again by a later call of this process past the threshold,
 * so a crossing is not lost to a database that refused one write. One call that crosses both thresholds (a small
 * count) tells both, 80 % first.
 */
export class UsageEvents {
  /** Told crossings: base -> the window start it was told for. */
  private readonly told = new Map<string, number>()
  /** Once keys being written now (a busy key's next calls do not write them again meanwhile). */
  private readonly writing = new Set<string>()
  /** Crossings this process saw but could not write (a failed or skipped write): base -> window start; later calls of that window try again. */
  private readonly unwritten = new Map<string, number>()
  private quietUntil = 0

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly events: EventBus,
    private readonly clock: () => number,
  ) {}


  /** Writes the crossings not told yet, in order; a failure stops the rest (a later call tries again). */
  private tell(crossings: Crossing[]): void {
    const due = crossings.filter((crossing) => !inWindow(this.told, crossing.base, crossing.start) && !this.writing.has(crossing.event.once!))
    if (due.length === 0) return
    if (this.clock() < this.quietUntil) {
      for (const crossing of due) remember(this.unwritten, crossing)
      return
    }
    for (const crossing of due) this.writing.add(crossing.event.once!)
    void (async () => {
      let failed = false
      for (const crossing of due) {
        // Nobody wanted it: told too (asking again would cost a query every call past the threshold).
        if (!failed && await this.events.emitAlone(crossing.event) !== 'failed') {
          remember(this.told, crossing)
          this.unwritten.delete(crossing.base)
        } else {
          if (!failed) this.quietUntil = this.clock() + retryQuietMs
          failed = true
          remember(this.unwritten, crossing)
        }
        this.writing.delete(crossing.event.once!)
      }
    })()
  }

  /**
   * A counted call brought a window to `used` calls: a threshold is told by the call
   * whose count is exactly its count (one call of one process, however many share the
   * counter: the store counts atomically), or by a later call of the process whose write
   * of it failed. Other processes past it never write it: each works out the window's
   * start from its own clock, and two of them could round it to neighbouring seconds,
   * two once keys for one crossing.
   */
  counted(caller: CallerKey, window: RateWindow, quota: TenantQuota | null, used: number, resetMs: number): void {
    if (used < thresholdCount(window.count, thresholds[0])) return
    const resetAt = this.clock() + resetMs
    // The window's start, to the second: the same on every process sharing the counter.
    const start = Math.round((resetAt - window.seconds * 1000) / 1000)
    const scope = quota === null ? { parent: caller.parent, custno: caller.custno } : { parent: quota.parent, custno: quota.custno }
    const subject = quota === null ? `key:${caller.id}` : `tenant:${quota.parent}:${quota.custno}`
    const crossings: Crossing[] = []
    for (const percent of thresholds) {
      if (used < thresholdCount(window.count, percent)) break
      const base = `key.usage:${subject}:${window.count}/${window.label}:${percent}`
      // The usual case past a threshold: told already, or by the call that reached it.
      if (used !== thresholdCount(window.count, percent) && !inWindow(this.unwritten, base, start)) continue
      if (inWindow(this.told, base, start)) continue
      crossings.push({
        base,
        start,
        event: {
          type: 'key.usage',
          ...scope,
          data: {
            KeyId: caller.id, Name: caller.displayName, Parent: caller.parent, Custno: caller.custno,
            Limit: quota === null ? 'MaxHits' : 'Tenant', Window: window.label, Count: window.count, Used: used, Percent: percent, ResetDate: httpDate(resetAt),
            ...(quota === null ? {} : { Tenant: { Parent: quota.parent, Custno: quota.custno } }),
          },
          once: `key.usage:${subject}:${window.count}/${window.label}:${start}:${percent}`,
        },
      })
    }
    this.tell(crossings)
  }

  /**
   * A key spent credits. Read back after the spend, off the call's path: with a Refill
   * the window is the refill period and 100 % is its Amount; without one 100 % is the
   * count as last set (Credits, AddCredits' total), once per setting of it. A key whose
   * count as set is unknown tells only running out.
   */
  async spent(keyId: number): Promise<void> {
    const row = await this.db.selectFrom('api_keys')
      .select(['id', 'display_name', 'parent', 'custno', 'credits', 'refill_amount', 'refill_at', 'credits_set', 'credits_set_at', 'updated_at'])
      .where('id', '=', keyId).executeTakeFirst()
    if (!row || row.credits === null) return
    const left = Number(row.credits)
    const refilled = row.refill_amount !== null
    const total = refilled ? Number(row.refill_amount) : row.credits_set === null ? null : Number(row.credits_set)
    const window = refilled ? `refill:${Number(row.refill_at)}` : `set:${Number(row.credits_set_at ?? row.updated_at)}`
    const crossings: Crossing[] = []
    for (const percent of thresholds) {
      const reached = total === null ? percent === 100 && left <= 0 : total - left >= thresholdCount(total, percent)
      if (!reached) continue
      const once = `key.usage:credits:${row.id}:${window}:${percent}`
      crossings.push({
        base: once,
        start: 0,
        event: {
          type: 'key.usage',
          parent: Number(row.parent),
          custno: Number(row.custno),
          data: {
            KeyId: Number(row.id), Name: row.display_name, Parent: Number(row.parent), Custno: Number(row.custno),
            // What is left at the crossing itself: the count read back may already be lower (calls in parallel).
            Limit: 'Credits', Left: total === null ? 0 : total - thresholdCount(total, percent), Count: total, Percent: percent,
            ResetDate: row.refill_at === null ? null : httpDate(Number(row.refill_at)),
          },
          once,
        },
      })
    }
    this.tell(crossings)
  }
}
