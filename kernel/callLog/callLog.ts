import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import type { LogRecord } from '../plugin.ts'
import { CallLogQueue, type QueueOptions } from './queue.ts'
import { CallLogRetention, type RetentionOptions } from './retention.ts'
import { CallLogReads } from './reads.ts'
import type { LogRow } from './record.ts'
import { callUsage, type UsageCount, type UsageQuery, type UsageScope } from './usage.ts'

export type { LogRow } from './record.ts'

export type CallLogOptions = QueueOptions & RetentionOptions

/**
 * The call log (D8) as the kernel holds it: the write queue (queue.ts), the reads of
 * the log plugin (reads.ts) and retention (retention.ts) over one table, with the row
 * and record shapes in record.ts. This class only puts the three together.
 */
export class CallLog {
  private readonly queue: CallLogQueue
  private readonly retention: CallLogRetention
  private readonly reads: CallLogReads

  constructor(
    private readonly db: Kysely<CoreTables>,
    options: CallLogOptions,
    clock: () => number,
    report: (error: unknown) => void,
    /** This process's node id: a sibling's fresh record may still be in the sibling's queue. */
    nodeId = 0,
    /** How a batch is written (Database.insertMany; plain Kysely when not given). */
    insertBatch?: (rows: readonly LogRow[]) => Promise<unknown>,
    /** Whether other processes serve calls now (their queued records land within flushMs). */
    othersServing: () => Promise<boolean> = async () => false,
  ) {
    this.queue = new CallLogQueue(db, options, report, insertBatch)
    this.retention = new CallLogRetention(db, options, clock, report)
    this.reads = new CallLogReads(db, this.queue, options, clock, nodeId, othersServing)
  }

  /** This process now holds another node id (a fresh record under the old one is a sibling's). */
  useNode(nodeId: number): void {
    this.reads.useNode(nodeId)
  }

  /** Told the duration of each written batch (metrics). */
  set flushObserver(observer: ((seconds: number) => void) | null) {
    this.queue.flushObserver = observer
  }

  /** Resolves at once while there is room; otherwise when a flush has made some. */
  admit(): Promise<void> | undefined {
    return this.queue.admit()
  }

  /** The database is away and the queue is full: a new call is refused (503) rather than left waiting. */
  refusesNewCalls(): boolean {
    return this.queue.refusesNewCalls()
  }

  append(row: LogRow): void {
    this.queue.append(row)
  }

  flush(): Promise<void> {
    return this.queue.flush()
  }

  get queued(): number {
    return this.queue.queued
  }

  detailUntil(requestTime: number, logRaw: number): number {
    return this.retention.detailUntil(requestTime, logRaw)
  }

  startPurging(): void {
    this.retention.startPurging()
  }

  purge(): Promise<{ detailsCleared: number; recordsDeleted: number }> {
    return this.retention.purge()
  }

  find(id: number, keyId: number): Promise<(LogRecord & { Id: number }) | undefined> {
    return this.reads.find(id, keyId)
  }

  history(keyId: number, options: { page: number; size: number; from?: number; to?: number; apiFunction?: string }) {
    return this.reads.history(keyId, options)
  }

  /** Calls per time bucket and status, of a key or a tenant (usage.ts). */
  usage(scope: UsageScope, query: UsageQuery): Promise<UsageCount[]> {
    return callUsage(this.db, this.queue, scope, query)
  }

  lastId(): Promise<number> {
    return this.reads.lastId()
  }

  /** Stops purging, then writes every queued record (retrying through a short outage); how many it could not write. */
  async close(deadlineMs = 10_000): Promise<number> {
    await this.retention.close()
    return this.queue.close(deadlineMs)
  }
}
