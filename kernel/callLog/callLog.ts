import type { Insertable, Kysely, Selectable } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { isStoreOutage } from '../storage/database.ts'
import { firstIdAt, nodeOfId, timeOfId } from './requestId.ts'
import { httpDate } from '../auth/apiDate.ts'
import type { LogRecord } from '../plugin.ts'

export type LogRow = Insertable<CoreTables['api_log']>

export interface CallLogOptions {
  batchSize: number
  flushMs: number
  queueMax: number
  detailDays: number
  recordDays: number
  purgeEveryMs: number
  purgeBatch: number
}

/**
 * The log stage's store (D8). Calls never wait for a write: records are queued and
 * written in multi-row batches. Until its batch is written a record stays readable
 * from the queue (read-your-writes). The queue is bounded: when it is full, `admit`
 * tells the caller to wait for room instead of dropping anything; `close` writes all.
 */
export class CallLog {
  private queue: LogRow[] = []
  private readonly pending = new Map<number, LogRow>()
  private flushing: Promise<void> | null = null
  private timer: NodeJS.Timeout | null = null
  private purgeTimer: NodeJS.Timeout | null = null
  private waiters: (() => void)[] = []
  private retryDelayMs = 100
  private closed = false
  /** Waiting calls let go whose records are not appended yet (they hold room in the queue). */
  private woken = 0
  private purging: Promise<{ detailsCleared: number; recordsDeleted: number }> | null = null
  /** Told the duration of each written batch (metrics); null = nobody listens. */
  flushObserver: ((seconds: number) => void) | null = null

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly options: CallLogOptions,
    private readonly clock: () => number,
    private readonly report: (error: unknown) => void,
    /** This process's node id: a sibling's fresh record may still be in the sibling's queue. */
    private readonly nodeId = 0,
    /** How a batch is written (Database.insertMany; plain Kysely when not given). */
    private readonly insertBatch: (rows: readonly LogRow[]) => Promise<unknown> = (rows) => db.insertInto('api_log').values(rows as LogRow[]).execute(),
  ) {}

  startPurging(): void {
    this.purgeTimer = setInterval(() => void this.purge().catch(this.report), this.options.purgeEveryMs)
    this.purgeTimer.unref()
  }

  /** Resolves at once while there is room; otherwise when a flush has made some. */
  admit(): Promise<void> | undefined {
    if (this.queue.length + this.woken < this.options.queueMax && this.waiters.length === 0) return undefined
    // A full queue is being written already (append scheduled it); waiting for that
    // write, in arrival order, is the backpressure.
    this.flushSoon(0)
    return new Promise((resolve) => this.waiters.push(resolve))
  }

  /** Retention of details for one record: LogRaw days (0 = the default), never beyond the bound. */
  detailUntil(requestTime: number, logRaw: number): number {
    const days = logRaw > 0 ? Math.min(logRaw, this.options.detailDays) : this.options.detailDays
    return requestTime + days * 86_400_000
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
        this.done(written)
        this.retryDelayMs = Math.min(this.retryDelayMs * 2, 5000)
        this.report(error)
        return
      }
      this.retryDelayMs = 100
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
        await this.db.insertInto('api_log').values(row).execute()
      } catch (error) {
        if (isStoreOutage(error)) throw error
        this.report(error)
      }
      settled()
    }
  }

  async find(id: number, keyId: number): Promise<(LogRecord & { Id: number }) | undefined> {
    const queued = this.pending.get(id)
    if (queued) return queued.key_id === keyId ? toLogRecord(queued as Selectable<CoreTables['api_log']>) : undefined
    const read = () => this.db.selectFrom('api_log').selectAll().where('id', '=', id).where('key_id', '=', keyId).executeTakeFirst()
    let row = await read()
    if (!row && nodeOfId(id) !== this.nodeId && this.clock() - timeOfId(id) < 5000) {
      // Made a moment ago by a sibling process (cluster mode): its batch lands within
      // flushMs, so wait that long once rather than answer 404 to read-your-writes.
      await new Promise((resolve) => setTimeout(resolve, this.options.flushMs * 2 + 20))
      row = await read()
    }
    return row ? toLogRecord(row) : undefined
  }

  /**
   * A key's calls, newest first. The time range is applied to the request id (its time
   * part), so the (key_id, id) index serves the filter, the order and the page alike.
   * Queued records are written first, so the page includes every answered call.
   */
  async history(keyId: number, options: { page: number; size: number; from?: number; to?: number; apiFunction?: string }) {
    await this.flush()
    let query = this.db.selectFrom('api_log').where('key_id', '=', keyId)
    if (options.from !== undefined) query = query.where('id', '>=', firstIdAt(options.from))
    if (options.to !== undefined) query = query.where('id', '<', firstIdAt(options.to + 1))
    // Paths are case-insensitive (D1); the key's id range is small enough to compare lowered.
    if (options.apiFunction !== undefined) query = query.where((eb) => eb(eb.fn('lower', ['api_function']), '=', options.apiFunction!.toLowerCase()))
    const [{ total }] = await query.select((eb) => eb.fn.countAll<number>().as('total')).execute()
    const rows = await query
      .select(['id', 'request_time', 'request_method', 'api_function', 'api_acl', 'response_code', 'seconds', 'bandwidth'])
      .orderBy('id', 'desc')
      .limit(options.size)
      .offset((options.page - 1) * options.size)
      .execute()
    return {
      total: Number(total),
      records: rows.map((row) => ({
        Id: Number(row.id),
        RequestTime: httpDate(Number(row.request_time)),
        Request_Method: row.request_method,
        Api_Function: row.api_function,
        Api_Acl: row.api_acl === null ? null : Number(row.api_acl),
        Response_Code: Number(row.response_code),
        Seconds: Number(row.seconds),
        Bandwidth: Number(row.bandwidth),
      })),
    }
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
          detail_until: 0,
        }))
        .where('id', 'in', rows.map((row) => row.id)).execute()
      detailsCleared += rows.length
      if (rows.length < batch || this.closed) break
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

  /** The highest request id written so far (0 when none): request ids resume after it. */
  async lastId(): Promise<number> {
    const row = await this.db.selectFrom('api_log').select((eb) => eb.fn.max('id').as('last')).executeTakeFirst()
    return row?.last === null || row?.last === undefined ? 0 : Number(row.last)
  }

  get queued(): number {
    return this.queue.length
  }

  /** Stops timers and writes every queued record; retries through a short outage. */
  async close(deadlineMs = 10_000): Promise<void> {
    this.closed = true
    if (this.timer) clearTimeout(this.timer)
    if (this.purgeTimer) clearInterval(this.purgeTimer)
    // A purge under way stops after its current batch; let it, before the database closes.
    await this.purging?.catch(() => undefined)
    const giveUpAt = Date.now() + deadlineMs
    while (this.queue.length > 0 && Date.now() < giveUpAt) {
      await this.flush()
      if (this.queue.length > 0) await new Promise((resolve) => setTimeout(resolve, this.retryDelayMs))
    }
    if (this.queue.length > 0) this.report(new Error(`${this.queue.length} call log records could not be written before shutdown`))
    // Calls still waiting for room go on (their records are reported above, not lost silently).
    for (const wake of this.waiters.splice(0)) wake()
  }
}

/**
 * Rsponse as stored: a successful answer is kept as JSON whatever format it was sent in
 * (see stages/log.ts), so it is given back as the value it was; error messages and
 * answers served from cache in XML/CSV are text.
 */
function parsedResponse(row: Selectable<CoreTables['api_log']>): unknown {
  const text = row.response
  if (text === null || text === undefined) return null
  if (Number(row.response_code) < 400 && (row.response_format === 'json' || text.startsWith('{') || text.startsWith('['))) {
    try {
      return JSON.parse(text)
    } catch {
      return text
    }
  }
  return text
}

/** Lets the event loop serve calls between two purge batches. */
function betweenBatches(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

export function toLogRecord(row: Selectable<CoreTables['api_log']>): LogRecord & { Id: number } {
  return {
    Id: Number(row.id),
    RequestTime: httpDate(Number(row.request_time)),
    Http_Host: row.http_host ?? null,
    Server_Name: row.server_name ?? null,
    Server_Addr: row.server_addr ?? null,
    Server_Port: row.server_port === null || row.server_port === undefined ? null : Number(row.server_port),
    Remote_Addr: row.remote_addr ?? null,
    Request_Scheme: row.request_scheme ?? null,
    Request_Method: row.request_method,
    Api_Acl: row.api_acl === null || row.api_acl === undefined ? null : Number(row.api_acl),
    Api_Function: row.api_function,
    Request_Url: row.request_url ?? null,
    Http_User_Agent: row.http_user_agent ?? null,
    Raw_Request: row.raw_request ?? null,
    Response_Code: Number(row.response_code),
    Rsponse: parsedResponse(row),
    Response_Format: row.response_format ?? null,
    Seconds: Number(row.seconds),
    Bandwidth: Number(row.bandwidth),
    Secret: row.signed_with ?? null,
  }
}
