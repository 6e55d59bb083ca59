import { sql, type Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import type { CallLogQueue } from './queue.ts'
import { arrivedWithin } from './arrivalRange.ts'

/** Whose calls: one key's, or every key of a tenant (custno 0: the whole parent). */
export type UsageScope = { keyId: number } | { parent: number; custno: number }

export interface UsageQuery {
  from: number
  to: number
  /** Bucket length in ms (an hour, a day); buckets start at multiples of it (UTC). */
  stepMs: number
}

/** Calls of one bucket that ended with one status. */
export interface UsageCount {
  bucket: number
  status: number
  calls: number
}

/** At most 31 days of buckets: the aggregate stays a bounded scan of the (key_id, id) index. */
export const maxUsageSpanMs = 31 * 86_400_000

/**
 * The call log summed per time bucket and status (the console's Usage page, POST
 * /Api/Read/Usage). The time range is request_time's, bounded first by the request id
 * (its time part), so the (key_id, id) index bounds the scan; the bucket is request_time minus its
 * remainder, the same expression on SQLite and MySQL. Queued records are written first,
 * so the calls just answered are counted.
 */
export async function callUsage(db: Kysely<CoreTables>, queue: CallLogQueue, scope: UsageScope, query: UsageQuery): Promise<UsageCount[]> {
  if (query.to - query.from > maxUsageSpanMs) throw new RangeError('usage range longer than 31 days')
  await queue.flush()
  const step = Math.trunc(query.stepMs)
  const bucket = sql<number>`request_time - (request_time % ${sql.lit(step)})`
  let select = db.selectFrom('api_log').where(arrivedWithin(query))
  if ('keyId' in scope) {
    select = select.where('key_id', '=', scope.keyId)
  } else {
    let keys = db.selectFrom('api_keys').select('id').where('parent', '=', scope.parent)
    if (scope.custno !== 0) keys = keys.where('custno', '=', scope.custno)
    select = select.where('key_id', 'in', keys)
  }
  const rows = await select
    .select([bucket.as('bucket'), 'response_code', (eb) => eb.fn.countAll<number>().as('calls')])
    .groupBy([bucket, 'response_code'])
    .orderBy('bucket')
    .orderBy('response_code')
    .execute()
  return rows.map((row) => ({ bucket: Number(row.bucket), status: Number(row.response_code), calls: Number(row.calls) }))
}
