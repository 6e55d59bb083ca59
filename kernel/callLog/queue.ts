import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { isStoreOutage, isUniqueViolation } from '../storage/database.ts'
import { narrowedRow, storedRow, type LogRow } from './record.ts'

export interface QueueOptions {
  batchSize: number
  flushMs: number
  queueMax: number
}

/**
 * The call log's write queue (D8). Calls never wait for a write: records are queued and
 * written in multi-row batches. Until its batch is written a record stays readable
 * from the queue (read-your-writes, `queuedRecord`). The queue is bounded: when it is
 * full, `admit` tells the caller to wait for room instead of dropping anything; `close`
 * writes all.
 */
export class CallLogQueue {
  private queue: LogRow[] = []
  private readonly pending = new Map<number, LogRow>()
  private flushing: Promise<void> | null = null
  private timer: NodeJS.Timeout | null = null
  private waiters: (() => void)[] = []
  private retryDelayMs = 100
  private closed = false
  /** Waiting calls let go whose records are not appended yet (they hold room in the queue). */
  private woken = 0
  /** The last write failed because the database is unreachable (cleared by the next write that lands). */
  private outage = false
  /** Told the duration of each written batch (metrics); null = nobody listens. */
  flushObserver: ((seconds: number) => void) | null = null

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly options: QueueOptions,
    private readonly report: (error: unknown) => void,
    /** How a batch is written (Database.insertMany; plain Kysely when not given). */
    private readonly insertBatch: (rows: readonly LogRow[]) => Promise<unknown> = (rows) => db.insertInto('api_log').values(rows.map(storedRow)).execute(),
  ) {}

  /** Resolves at once while there is room; otherwise when a flush has made some. */
  admit(): Promise<void> | undefined {
    if (this.queue.length + this.woken < this.options.queueMax && this.waiters.length === 0) return undefined
    // A full queue is being written already (append scheduled it); waiting for that
    // write, in arrival order, is the backpressure.
    this.flushSoon(0)
    return new Promise((resolve) => this.waiters.push(resolve))
  }

  /**
   * True while the database is away and the queue is (nearly) full: a new call would
   * only wait, for as long as the outage lasts, for room for its record. It is refused
   * at once instead (503, before it is authenticated, so it has no record to keep).
   * A tenth of the queue stays for the calls already under way. With the database up
   * (only slow) nothing is refused: a full queue then slows callers down (backpressure).
   */
  refusesNewCalls(): boolean {
    if (!this.outage) return false
    return this.waiters.length > 0 || this.queue.length + this.woken >= this.options.queueMax - Math.floor(this.options.queueMax / 10)
  }

  append(row: LogRow): void {
    if (this.closed) {
      // Only a call cut off by the shutdown deadline gets here; its client got no answer.
      this.report(new Error(`call log closed: record ${row.id} of an unanswered call not written`))
      return
    }
    if (this.woken > 0) this.woken--
    this.queue.push(row)
    this.pending.set(row.id, row)
    if (this.queue.length >= this.options.batchSize) this.flushSoon(0)
    else this.flushSoon(this.options.flushMs)
  }

  private flushSoon(delay: number): void {
    if (this.flushing) return
    if (this.timer && delay > 0) return
    if (this.timer) clearTimeout(this.timer)
    this.timer = setTimeout(() => {
      this.timer = null
      void this.flush()
    }, delay)
  }

  /** Writes everything queued so far (one batch after another). */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing
    this.flushing = this.writeAll().finally(() => {
      this.flushing = null
      this.wakeWaiters()
      if (this.queue.length > 0 && !this.closed) this.flushSoon(this.retryDelayMs)
    })
    return this.flushing
  }

  private async writeAll(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.slice(0, this.options.batchSize)
      // How many of the batch are in the table: only those leave the queue.
      let written = 0
      try {
        try {
          const started = performance.now()
          await this.insertBatch(batch)
          written = batch.length
          this.flushObserver?.((performance.now() - started) / 1000)
        } catch (error) {
          if (isStoreOutage(error)) throw error
          await this.writeOneByOne(batch, () => written++)
        }
      } catch (error) {
        // An outage: keep what is not written; it is retried with backoff and stays
        // readable from the queue meanwhile.
        this.outage = true
        this.done(written)
        this.retryDelayMs = Math.min(this.retryDelayMs * 2, 5000)
        this.report(error)
        return
      }
      this.retryDelayMs = 100
      this.outage = false
      this.done(written)
    }
  }

  /** The first `count` queued records are in the database: drop them from the queue. */
  private done(count: number): void {
    if (count === 0) return
    for (const row of this.queue.splice(0, count)) this.pending.delete(row.id)
    this.wakeWaiters()
  }

  // Only as many waiting calls as there is room for go on (counting those woken but not
  // yet appended), so the queue stays bounded by queueMax even when many calls waited.
  private wakeWaiters(): void {
    let room = this.options.queueMax - this.queue.length - this.woken
    while (room-- > 0 && this.waiters.length > 0) {
      this.woken++
      this.waiters.shift()!()
    }
  }

  // A batch refused for a reason other than an outage (a duplicate id from a
  // misconfigured nodeId, say) is written row by row so one bad row loses only itself.
  private async writeOneByOne(batch: LogRow[], settled: () => void): Promise<void> {
    for (const row of batch) {
      try {
        await this.db.insertInto('api_log').values(storedRow(row)).execute()
      } catch (error) {
        if (isStoreOutage(error)) throw error
        this.report(error)
        // Refused as it was (not as a duplicate): written narrowed, so the answered call keeps its record.
        if (!isUniqueViolation(error)) await this.db.insertInto('api_log').values(narrowedRow(row)).execute().catch((again: unknown) => {
          if (isStoreOutage(again)) throw again
          this.report(again)
        })
      }
      settled()
    }
  }

  /** A record still waiting for its batch, if it is. */
  queuedRecord(id: number): LogRow | undefined {
    return this.pending.get(id)
  }

  get queued(): number {
    return this.queue.length
  }

  /**
   * Stops timers and writes every queued record; retries through a short outage. How
   * many records it could not write (lost: the caller says so, and a stop exits 1).
   */
  async close(deadlineMs = 10_000): Promise<number> {
    this.closed = true
    if (this.timer) clearTimeout(this.timer)
    const giveUpAt = Date.now() + deadlineMs
    while (this.queue.length > 0 && Date.now() < giveUpAt) {
      await this.flush()
      if (this.queue.length > 0) await new Promise((resolve) => setTimeout(resolve, this.retryDelayMs))
    }
    // Calls still waiting for room go on (their records are counted in what is returned, not lost silently).
    for (const wake of this.waiters.splice(0)) wake()
    return this.queue.length
  }
}
