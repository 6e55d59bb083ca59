import { RateLimiterRes } from 'rate-limiter-flexible'
import type { RateWindow } from './maxHits.ts'
import type { CallerKey, TenantQuota, TenantWindowStatus, WindowStatus } from '../plugin.ts'

/**
 * A consume's answer that names the window it was counted in: `windowEnd` (on the
 * store's own clock) and the limiter that counted it. A give-back takes both, so it
 * reaches that same window only, never a later one that counts other calls.
 */
export class CountedRes extends RateLimiterRes {
  constructor(remaining: number, msBeforeNext: number, consumed: number, first: boolean, readonly windowEnd: number, readonly countedBy: WindowLimiter) {
    super(remaining, msBeforeNext, consumed, first)
  }
}

/**
 * What the limiter store must do for one window: consume and get as
 * rate-limiter-flexible's limiters answer them (consume rejects with a RateLimiterRes
 * when the points are spent), and a give-back bound to the window a consume counted in.
 */
export type WindowLimiter = {
  consume(key: string | number, points?: number): Promise<RateLimiterRes>
  /**
   * Gives `points` back to the window `taken` (this limiter's consume answer, allowed or
   * refused) was counted in, while that window lasts. A window that has ended since
   * gets nothing: a give-back never opens a window, never takes one below zero, and
   * never frees a place in the next window (whose count holds other calls), so no
   * window answers more than its count.
   */
  giveBack(key: string | number, taken: RateLimiterRes, points?: number): Promise<void>
  get(key: string | number): Promise<RateLimiterRes | null>
}

/**
 * The limiter store seam (D7). Every window of every key is counted by a limiter made
 * by a `LimiterFactory`: in-memory fixed windows (one process, below), the cluster
 * primary's (kernel/boot/cluster.ts) or Redis's (redisLimiters.ts), which falls back to
 * per-process counting while Redis is away instead of refusing every call.
 */
export type LimiterFactory = (options: { points: number; duration: number; keyPrefix: string }) => WindowLimiter

/** One key's count in one window. */
interface WindowCount {
  consumed: number
  resetAt: number
}

const sweepEveryMs = 60_000

/** Counts one in-memory window keeps at most (default; see MemoryWindowLimiter). */
export const defaultMaxCounts = 100_000

/**
 * Keys one in-memory window counts in a service that keeps `maxEntries` keys loaded:
 * twice those, and never fewer than `defaultMaxCounts`, so a smaller key cache does not
 * make a long window (1Hour, 1Mon) forget its counts sooner.
 */
export const rateCountsMax = (maxEntries: number): number => Math.max(defaultMaxCounts, 2 * maxEntries)

/**
 * A fixed window counted in this process. Not rate-limiter-flexible's RateLimiterMemory:
 * that one expires each count with a setTimeout, which Node cannot hold beyond 24.8
 * days, so a 1Mon window would reset after every call. Here counts expire by the
 * (injectable) clock when touched, and a sweep now and then drops the idle ones.
 *
 * Memory is bounded (issue 19 goal 4): at most `maxCounts` keys are counted; when a new
 * key would pass that, the expired counts go first, then the oldest-opened ones (a key
 * whose count was dropped starts a fresh window: only keys idle behind `maxCounts`
 * busier ones, far more than the key directory keeps loaded, ever lose a count).
 */
export class MemoryWindowLimiter implements WindowLimiter {
  private readonly counts = new Map<string | number, WindowCount>()
  private nextSweepAt = 0
  /**
   * A window's counts are swept at its own pace (at most once a minute): a 1Sec window
   * keeps about a second's keys, not `maxCounts` long-expired ones waiting for the
   * minute's sweep (issue 19 goal 4).
   */
  private readonly sweepEveryMs: number

  constructor(private readonly points: number, private readonly durationMs: number, private readonly clock: () => number, private readonly maxCounts = defaultMaxCounts) {
    this.sweepEveryMs = Math.min(sweepEveryMs, Math.max(1000, durationMs))
  }

  /** How many keys are counted now (tests check the bound). */
  get size(): number {
    return this.counts.size
  }

  private current(key: string | number, now: number): WindowCount {
    if (now >= this.nextSweepAt) this.sweep(now)
    let count = this.counts.get(key)
    if (count === undefined) {
      if (this.counts.size >= this.maxCounts) this.makeRoom(now)
      count = { consumed: 0, resetAt: now + this.durationMs }
      this.counts.set(key, count)
    } else if (count.resetAt <= now) {
      count.consumed = 0
      count.resetAt = now + this.durationMs
    }
    return count
  }

  /**
   * Whether no key has a live count here (expired ones are swept first, at the window's
   * own pace, so asking often costs no walk): such a window can be dropped, its keys
   * lose nothing (makeRoomForWindow).
   */
  idle(): boolean {
    const now = this.clock()
    if (now >= this.nextSweepAt) this.sweep(now)
    return this.counts.size === 0
  }

  private sweep(now: number): void {
    this.nextSweepAt = now + this.sweepEveryMs
    for (const [key, count] of this.counts) if (count.resetAt <= now) this.counts.delete(key)
  }

  // A Map iterates in insertion order: the first entries are the oldest-opened counts.
  private makeRoom(now: number): void {
    this.sweep(now)
    for (const key of this.counts.keys()) {
      if (this.counts.size < this.maxCounts) break
      this.counts.delete(key)
    }
  }

  private result(count: WindowCount, now: number, first: boolean): CountedRes {
    return new CountedRes(Math.max(0, this.points - count.consumed), count.resetAt - now, count.consumed, first, count.resetAt, this)
  }

  /** `consume` without a promise, for callers that stay synchronous on the hot path. */
  consumeNow(key: string | number, points = 1): { result: CountedRes; allowed: boolean } {
    const now = this.clock()
    const count = this.current(key, now)
    const first = count.consumed === 0
    count.consumed += points
    return { result: this.result(count, now, first), allowed: count.consumed <= this.points }
  }

  consume(key: string | number, points = 1): Promise<RateLimiterRes> {
    const { result, allowed } = this.consumeNow(key, points)
    return allowed ? Promise.resolve(result) : Promise.reject(result)
  }

  /**
   * Gives points back to the window that ends at `windowEnd` (a consume's
   * `CountedRes.windowEnd`) while it lasts; a window reset or dropped since gets
   * nothing, and none is opened (see WindowLimiter.giveBack).
   */
  giveBackNow(key: string | number, points: number, windowEnd: number): void {
    const count = this.counts.get(key)
    if (count === undefined || count.resetAt !== windowEnd || count.resetAt <= this.clock()) return
    count.consumed = Math.max(0, count.consumed - points)
  }

  giveBack(key: string | number, taken: RateLimiterRes, points = 1): Promise<void> {
    if (taken instanceof CountedRes && taken.countedBy === this) this.giveBackNow(key, points, taken.windowEnd)
    return Promise.resolve()
  }

  get(key: string | number): Promise<RateLimiterRes | null> {
    const now = this.clock()
    const count = this.counts.get(key)
    return Promise.resolve(count === undefined || count.resetAt <= now ? null : this.result(count, now, false))
  }
}

/** The store of a single process: fixed windows in memory, on the kernel's clock, each counting at most `maxCounts` keys. */
export function inMemoryLimiters(clock: () => number = Date.now, maxCounts = defaultMaxCounts): LimiterFactory {
  return (options) => new MemoryWindowLimiter(options.points, options.duration * 1000, clock, maxCounts)
}

export interface RateDecision {
  allowed: boolean
  /** The exceeded window when refused; otherwise the tightest one (fewest calls left). */
  window: RateWindow
  remaining: number
  resetMs: number
  /** `RateLimit-Policy` value of `window`, made once per window. */
  policy: string
  /** The quoted policy name that starts the `RateLimit` value, made once per window. */
  policyName: string
  /** The tenant quota `window` belongs to; null for the key's own window. */
  quota: TenantQuota | null
}

/** One window's limiter and the parts of its header that never change. */
interface WindowCounter {
  limiter: WindowLimiter
  /** The window's value (`7/60`), under which WindowCounters holds its limiter. */
  name: string
  /** Named as the caller wrote the window (`"60Sec"` or `"1Min"`), though both count in one limiter. */
  policy: string
  policyName: string
}

const dayCodeGuesses = 10

/**
 * Distinct windows (count and length) kept per kind. Every distinct MaxHits value ever
 * used made a limiter that stayed for the life of the process: a key that may edit
 * keys could grow the memory without end by editing one key through new values.
 */
export const windowsMax = 10_000

/** One kind of window (a key's MaxHits, a tenant's quota): a limiter per distinct window, shared by everyone with that window. */
class WindowCounters {
  /** Limiters by window value (count and length): `7/60Sec` and `7/1Min` share one; oldest-made first. */
  private readonly byValue = new Map<string, WindowLimiter>()
  /**
   * By window object: a key's windows are parsed once when its record is loaded, so
   * the hot path finds its counter, and its header text in the key's own spelling,
   * without building a string per call.
   */
  private readonly byWindow = new WeakMap<RateWindow, WindowCounter>()

  constructor(
    private readonly makeLimiter: LimiterFactory,
    private readonly keyPrefix: string,
    private readonly labelPrefix: string,
    private readonly maxWindows: number,
  ) {}

  /** Distinct windows held now (tests check the bound). */
  get windows(): number {
    return this.byValue.size
  }

  /** Keys counted in this process over every window (0 with a shared store). */
  get counted(): number {
    let total = 0
    for (const limiter of this.byValue.values()) if (limiter instanceof MemoryWindowLimiter) total += limiter.size
    return total
  }

  for(window: RateWindow): WindowCounter {
    let counter = this.byWindow.get(window)
    // A limiter dropped by makeRoomForWindow is never counted in again: the window gets the one held now.
    if (counter && this.byValue.get(counter.name) === counter.limiter) return counter
    const name = `${window.count}/${window.seconds}`
    let limiter = this.byValue.get(name)
    if (!limiter) {
      makeRoomForWindow(this.byValue, this.maxWindows)
      limiter = this.makeLimiter({ points: window.count, duration: window.seconds, keyPrefix: `${this.keyPrefix}:${name}` })
      this.byValue.set(name, limiter)
    }
    const label = `"${this.labelPrefix}${window.label}"`
    counter = { limiter, name, policy: `${label};q=${window.count};w=${window.seconds}`, policyName: label }
    this.byWindow.set(window, counter)
    return counter
  }

}

/**
 * Before a new window is made (in a process's WindowCounters, and in the cluster primary's
 * limiters): in-memory windows whose counts all expired go, then, past `maxWindows`, the
 * oldest-made ones (a Map keeps the order they were made in): their keys start a fresh
 * window, as a count dropped by `maxCounts` does (a shared store's window loses nothing:
 * its counts live in the store). A new window is rare (a MaxHits value not seen before),
 * so the walk over at most `maxWindows` costs little.
 */
export function makeRoomForWindow(windows: Map<string, WindowLimiter>, maxWindows: number): void {
  for (const [name, limiter] of windows) if (limiter instanceof MemoryWindowLimiter && limiter.idle()) windows.delete(name)
  for (const name of windows.keys()) {
    if (windows.size < maxWindows) break
    windows.delete(name)
  }
}

/** Told of each counted call's new count in a window (issue 17's key.usage); set only while someone listens. */
export type WindowCountWatcher = (caller: CallerKey, window: RateWindow, quota: TenantQuota | null, used: number, resetMs: number) => void

export class RateLimits {
  /** key.usage (kernel/events/usageEvents.ts); null: nothing is done per call. */
  countWatcher: WindowCountWatcher | null = null
  /** The keys' MaxHits windows, counted per key. */
  private readonly keyCounters: WindowCounters
  /** Tenant quotas' windows, apart from the keys': the same window counts per tenant there. */
  private readonly tenantCounters: WindowCounters
  // Wrong day codes (D5) count here as well as on MaxHits, so guessing stays slow
  // even for a key without MaxHits.
  private readonly dayCodeFailures: WindowLimiter

  /** Every limiter the factory makes is a MemoryWindowLimiter: `consumeNow` can answer. */
  private readonly inMemory: boolean

  constructor(makeLimiter: LimiterFactory = inMemoryLimiters(), maxWindows = windowsMax) {
    this.dayCodeFailures = makeLimiter({ points: dayCodeGuesses, duration: 60, keyPrefix: 'daycode' })
    this.inMemory = this.dayCodeFailures instanceof MemoryWindowLimiter
    this.keyCounters = new WindowCounters(makeLimiter, 'maxhits', '', maxWindows)
    this.tenantCounters = new WindowCounters(makeLimiter, 'tenanthits', 'tenant-', maxWindows)
  }

  /** Distinct windows held, of keys and of tenant quotas (tests check the bound). */
  get windows(): number {
    return this.keyCounters.windows + this.tenantCounters.windows
  }

  /**
   * Counts one call in every window of the key and of its tenant quotas (issue 16).
   * Refused when any window is spent; a refused call is then given back to the windows
   * that had room, so hammering a spent 1Sec window does not also eat the key's 1Hour
   * allowance, nor its tenant's.
   *
   * With a shared store (Redis, cluster primary) concurrent calls overlap between
   * awaits, so a window can look spent only because of calls that are about to be
   * given back. Hence: shortest windows first, stop at the first refusal, and give the
   * point back to every window this call took, the refusing one too. A counter then
   * holds answered calls only (plus calls in flight), and never more than N are
   * answered in an N/window: an answered call's point stays.
   */
  async consume(caller: CallerKey): Promise<RateDecision | null> {
    const now = this.consumeNow(caller)
    if (now !== undefined) return now
    const tally = new Tally(caller, this.countWatcher)
    const windows = caller.rateWindows
    for (let index = 0; index < windows.length && tally.refused === null; index++) {
      const counter = this.keyCounters.for(windows[index])
      tally.add(counter, windows[index], caller.id, null, await settled(counter.limiter.consume(caller.id)))
    }
    for (const quota of tally.quotas) {
      const key = tenantCounterKey(quota)
      for (let index = 0; index < quota.windows.length && tally.refused === null; index++) {
        const counter = this.tenantCounters.for(quota.windows[index])
        tally.add(counter, quota.windows[index], key, quota, await settled(counter.limiter.consume(key)))
      }
    }
    // One window (taken null): nothing to give back and no other window to name.
    if (tally.refused === null || tally.taken === null) return tally.decision()
    const taken = tally.taken
    await Promise.all([...taken.map(([limiter, key, result]) => limiter.giveBack(key, result, 1)), this.spentLater(caller, tally, taken.length)])
    return tally.decision()
  }

  /**
   * A refused call stopped at its first spent window; the windows it did not reach are
   * only looked at (never counted), so that of several spent windows the 429 names the
   * one that frees up last, as when every window is counted.
   */
  private async spentLater(caller: CallerKey, tally: Tally, reached: number): Promise<void> {
    const looks: Promise<void>[] = []
    // Windows are taken in this same order: the first `reached` were counted.
    let index = 0
    const look = (counter: WindowCounter, window: RateWindow, key: string | number, quota: TenantQuota | null) => {
      if (index++ < reached) return
      looks.push(counter.limiter.get(key).then((state) => {
        if (state !== null && state.msBeforeNext > 0 && state.consumedPoints >= window.count) tally.spent(counter, window, quota, state)
      }))
    }
    for (const window of caller.rateWindows) look(this.keyCounters.for(window), window, caller.id, null)
    for (const quota of tally.quotas) for (const window of quota.windows) look(this.tenantCounters.for(window), window, tenantCounterKey(quota), quota)
    await Promise.all(looks)
  }

  /**
   * `consume` without a promise when every window is counted in this process (the
   * default store): the rate-limit stage then costs no microtask. Undefined when some
   * window lives in a shared store (cluster primary, Redis): use `consume`.
   */
  consumeNow(caller: CallerKey): RateDecision | null | undefined {
    const windows = caller.rateWindows
    const quotas = caller.tenantQuotas ?? noQuotas
    if (windows.length === 0 && quotas.length === 0) return null
    if (!this.inMemory) return undefined
    const tally = new Tally(caller, this.countWatcher)
    for (let index = 0; index < windows.length; index++) {
      const counter = this.keyCounters.for(windows[index])
      tally.add(counter, windows[index], caller.id, null, (counter.limiter as MemoryWindowLimiter).consumeNow(caller.id))
    }
    for (const quota of quotas) {
      const key = tenantCounterKey(quota)
      for (const window of quota.windows) {
        const counter = this.tenantCounters.for(window)
        tally.add(counter, window, key, quota, (counter.limiter as MemoryWindowLimiter).consumeNow(key))
      }
    }
    // Counted in this same turn: each window is still the one its result names.
    if (tally.refused && tally.taken) for (const [limiter, key, result] of tally.taken) (limiter as MemoryWindowLimiter).giveBackNow(key, 1, (result as CountedRes).windowEnd)
    return tally.decision()
  }

  /** Keys and tenants counted in this process, over all windows (issue 19: bounded). */
  get counted(): number {
    return this.keyCounters.counted + this.tenantCounters.counted
  }

  /** Each tenant quota's windows without consuming (GET /Api/Read/Limits). */
  async tenantStatus(caller: CallerKey, now = Date.now()): Promise<TenantWindowStatus[]> {
    const result: TenantWindowStatus[] = []
    for (const quota of caller.tenantQuotas ?? noQuotas) {
      const key = tenantCounterKey(quota)
      const windows: WindowStatus[] = []
      for (const window of quota.windows) windows.push(windowStatus(window, await this.tenantCounters.for(window).limiter.get(key), now))
      result.push({ parent: quota.parent, custno: quota.custno, windows })
    }
    return result
  }

  /**
   * Counts a wrong day code, in one atomic step of the store: 0 while it is among the
   * key's ten of the minute, else the milliseconds until the block ends. Counted and
   * judged at once, calls in flight together (on every process, with Redis) cannot all
   * pass a check made before any of them counted (D5, D16).
   */
  async dayCodeFailed(caller: CallerKey): Promise<number> {
    try {
      await this.dayCodeFailures.consume(caller.id)
      return 0
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection
      return Math.max(1, rejection.msBeforeNext)
    }
  }

  /** Milliseconds until the key's day-code block ends; 0 when it is not blocked. */
  async dayCodeBlocked(caller: CallerKey): Promise<number> {
    const state = await this.dayCodeFailures.get(caller.id)
    return state && state.consumedPoints >= dayCodeGuesses ? state.msBeforeNext : 0
  }

  /** Per-window state without consuming (GET /api/read/limits). */
  async status(caller: CallerKey, now = Date.now()): Promise<WindowStatus[]> {
    const result: WindowStatus[] = []
    for (const window of caller.rateWindows) result.push(windowStatus(window, await this.keyCounters.for(window).limiter.get(caller.id), now))
    return result
  }
}

const noQuotas: readonly TenantQuota[] = Object.freeze([])

/** A consume's outcome as a value: a refusal is a RateLimiterRes rejection; anything else is thrown on. */
function settled(pending: Promise<RateLimiterRes>): Promise<{ result: RateLimiterRes; allowed: boolean }> {
  return pending.then((result) => ({ result, allowed: true }), (rejection) => {
    if (!(rejection instanceof RateLimiterRes)) throw rejection
    return { result: rejection, allowed: false }
  })
}

/** One consume's windows as they are counted: the tightest, the refusing one, and those to give back on a refusal. */
class Tally {
  tightest: RateDecision | null = null
  refused: RateDecision | null = null
  /** Every window counted for this call, refusing ones too, with its count's answer: all are given back on a refusal. */
  taken: [WindowLimiter, string | number, RateLimiterRes][] | null = null
  /** Callers made by hand (tests) may have no tenant quotas at all. */
  readonly quotas: readonly TenantQuota[]
  // With one window there is nothing to give back: a refusal there means N were answered.
  private readonly several: boolean

  constructor(private readonly caller: CallerKey, private readonly watcher: WindowCountWatcher | null) {
    this.quotas = caller.tenantQuotas ?? noQuotas
    this.several = caller.rateWindows.length + this.quotas.length > 1
  }

  add(counter: WindowCounter, window: RateWindow, key: string | number, quota: TenantQuota | null, { result, allowed }: { result: RateLimiterRes; allowed: boolean }): void {
    const decision: RateDecision = {
      allowed, window, remaining: result.remainingPoints, resetMs: result.msBeforeNext, policy: counter.policy, policyName: counter.policyName, quota,
    }
    if (this.several) (this.taken ??= []).push([counter.limiter, key, result])
    if (allowed && this.watcher !== null) this.watcher(this.caller, window, quota, result.consumedPoints, result.msBeforeNext)
    if (!allowed) this.refuse(decision)
    // On a tie the window that resets later is the tighter: its last call is the one to wait for.
    if (!this.tightest || decision.remaining < this.tightest.remaining || (decision.remaining === this.tightest.remaining && decision.resetMs > this.tightest.resetMs)) this.tightest = decision
  }

  /** A window the call did not reach, looked at and found spent. */
  spent(counter: WindowCounter, window: RateWindow, quota: TenantQuota | null, state: RateLimiterRes): void {
    this.refuse({ allowed: false, window, remaining: 0, resetMs: state.msBeforeNext, policy: counter.policy, policyName: counter.policyName, quota })
  }

  // Of several spent windows, the one that frees up last decides Retry-After.
  private refuse(decision: RateDecision): void {
    if (!this.refused || decision.resetMs > this.refused.resetMs) this.refused = decision
  }

  decision(): RateDecision | null {
    return this.refused ?? this.tightest
  }
}

/** The limiter key of a tenant quota: one count per tenant, whichever of its keys calls. */
function tenantCounterKey(quota: TenantQuota): string {
  return `${quota.parent}:${quota.custno}`
}

function windowStatus(window: RateWindow, state: RateLimiterRes | null, now: number): WindowStatus {
  const live = state !== null && state.msBeforeNext > 0
  return {
    window,
    remaining: live ? Math.max(0, window.count - state.consumedPoints) : window.count,
    // A window not yet opened resets a full window after its first call.
    resetAt: now + (live ? state.msBeforeNext : window.seconds * 1000),
  }
}

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers) for the decision's
 * window (D7): `RateLimit-Policy: "1Min";q=3;w=60` and `RateLimit: "1Min";r=2;t=41`,
 * q the quota, w the window in seconds, r the calls left, t the seconds until reset.
 */
export function rateLimitHeaders(decision: RateDecision): [string, string][] {
  const resetSeconds = Math.max(0, Math.ceil(decision.resetMs / 1000))
  return [
    ['RateLimit-Policy', decision.policy],
    ['RateLimit', `${decision.policyName};r=${Math.max(0, decision.remaining)};t=${resetSeconds}`],
  ]
}
