import type { Kysely } from 'kysely'

/** What happened (issue 17). A plugin may emit its own types beside the kernel's. */
export type EventType = 'key.expiring' | 'key.usage' | 'key.changed' | 'key.rotated' | 'key.disabled' | 'people.import.finished' | (string & {})

/** One event: whose it is (the tenant it concerns), what it says, and whether it may happen only once. */
export interface KernelEvent {
  type: EventType
  /** The tenant the event concerns: parent-wide subscribers (Custno 0) of that Parent hear it too. */
  parent: number
  custno: number
  /** The payload's `data`: field names as the API spells them. */
  data: Record<string, unknown>
  /**
   * Set for an event that may happen only once (a usage threshold in one window, an
   * expiry warning): a subscriber keeps it unique, so several processes that notice
   * the same thing still make one event.
   */
  once?: string
}

/**
 * Runs inside the transaction of the change that causes the event, so what it writes
 * (an outbox row) commits or rolls back with the change itself. It answers false when
 * nobody it serves wants the event (it wrote nothing): an event with `once` noticed
 * outside a change (an expiry warning) is then offered again later, so one who
 * subscribes meanwhile still hears it.
 */
export type EventHandler = (trx: Kysely<any>, event: KernelEvent) => Promise<boolean | void>

/** What came of an event written on its own: kept by a subscriber, wanted by none, or not written (the database failed). */
export type EmitOutcome = 'kept' | 'unwanted' | 'failed'

/**
 * The kernel's event seam: plugins subscribe, the kernel and plugins emit inside their
 * transactions. Nothing is queued in memory: an event exists only as its subscribers'
 * rows in the database, written in the transaction that made it true.
 */
export class EventBus {
  private readonly handlers: EventHandler[] = []

  constructor(private readonly db: Kysely<any>, private readonly report: (error: unknown) => void) {}

  /** True when someone listens: callers skip noticing events (usage thresholds) otherwise. */
  get subscribed(): boolean {
    return this.handlers.length > 0
  }

  subscribe(handler: EventHandler): void {
    this.handlers.push(handler)
  }

  /** Hands the event to every subscriber inside `trx`; a subscriber's failure fails the transaction. True when one of them kept it. */
  async emit(trx: Kysely<any>, event: KernelEvent): Promise<boolean> {
    let kept = false
    for (const handler of this.handlers) if ((await handler(trx, event)) !== false) kept = true
    return kept
  }

  /**
   * An event noticed outside any change (a usage threshold crossed by a call, a key
   * about to expire): written in a small transaction of its own, off the caller's path.
   * A failure is reported, never thrown at the call that noticed it.
   */
  emitAlone(event: KernelEvent): Promise<EmitOutcome> {
    if (!this.subscribed) return Promise.resolve('unwanted')
    return this.db.transaction().execute((trx) => this.emit(trx, event)).then(
      (kept): EmitOutcome => (kept ? 'kept' : 'unwanted'),
      (error): EmitOutcome => {
        this.report(error)
        return 'failed'
      },
    )
  }
}
