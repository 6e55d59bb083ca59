import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { nodeOfId, timeOfId } from './requestId.ts'
import { arrivedWithin } from './arrivalRange.ts'
import { httpDate } from '../auth/apiDate.ts'
import type { LogRecord } from '../plugin.ts'
import type { CallLogQueue } from './queue.ts'
import { toLogRecord } from './record.ts'

/** How long a read waits for a sibling process's fresh record to land. */
const siblingWaitMs = 1000

/** The log plugin's reads (D8): one record of a key, a key's history, read-your-writes included. */
export class CallLogReads {
  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly queue: CallLogQueue,
    private readonly options: { flushMs: number },
    private readonly clock: () => number,
    /** This process's node id: a sibling's fresh record may still be in the sibling's queue. */
    private nodeId: number,
    private readonly othersServing: () => Promise<boolean> = async () => false,
  ) {}

  /**
   * This process now holds another node id (nodeRegistry.ts): records under its old id
   * are now made by the process that took it over, so they are waited for as a sibling's.
   */
  useNode(nodeId: number): void {
    this.nodeId = nodeId
  }

  async find(id: number, keyId: number): Promise<(LogRecord & { Id: number }) | undefined> {
    const queued = this.queue.queuedRecord(id)
    if (queued) return queued.key_id === keyId ? toLogRecord(queued) : undefined
    const read = () => this.db.selectFrom('api_log').selectAll().where('id', '=', id).where('key_id', '=', keyId).executeTakeFirst()
    let row = await read()
    if (!row && nodeOfId(id) !== this.nodeId && this.clock() - timeOfId(id) < 5000) {
      // Made a moment ago by a sibling process (cluster mode): its batch lands within a
      // flush or two (longer for a process that has just started), so look again until
      // it does, for up to a second, rather than answer 404 to read-your-writes.
      const until = Date.now() + siblingWaitMs
      while (!row && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, this.options.flushMs))
        row = await read()
      }
    }
    if (row && row.response === null && row.response_digest !== null) {
      // A shared answer (sharedAnswers.ts): its text is kept once, beside the records.
      const shared = await this.db.selectFrom('api_log_body').select('body').where('digest', '=', row.response_digest).executeTakeFirst()
      row = { ...row, response: shared?.body ?? null }
    }
    return row ? toLogRecord(row) : undefined
  }

  /**
   * A key's calls, newest first. The time range is RequestTime's, bounded first by the
   * request id (its time part), so the (key_id, id) index serves the filter, the order
   * and the page alike.
   * Queued records are written first, so the page includes every answered call.
   */
  async history(keyId: number, options: { page: number; size: number; from?: number; to?: number; apiFunction?: string }) {
    await this.queue.flush()
    // A call another process answered a moment ago may still be in its queue (D16: readable
    // through any process at once): with siblings serving, wait for their flushes (two, and
    // a margin: a process that has just started writes its first batches slower).
    if (await this.othersServing()) await new Promise((resolve) => setTimeout(resolve, this.options.flushMs * 2 + 150))
    let query = this.db.selectFrom('api_log').where('key_id', '=', keyId)
    if (options.from !== undefined || options.to !== undefined) query = query.where(arrivedWithin(options))
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

  /** The highest request id written so far (0 when none): request ids resume after it. */
  async lastId(): Promise<number> {
    const row = await this.db.selectFrom('api_log').select((eb) => eb.fn.max('id').as('last')).executeTakeFirst()
    return row?.last === null || row?.last === undefined ? 0 : Number(row.last)
  }
}
