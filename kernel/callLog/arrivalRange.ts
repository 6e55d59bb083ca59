import { sql, type RawBuilder, type SqlBool } from 'kysely'
import { firstIdAt, idLagLimitMs } from './requestId.ts'

/**
 * The calls of `api_log` that arrived (RequestTime) from `from` to `to`, both included,
 * either end optional. The request id's time part bounds the index scan (an id is made
 * at most `idLagLimitMs` after its call's arrival); request_time decides.
 */
export function arrivedWithin(range: { from?: number; to?: number }): RawBuilder<SqlBool> {
  const bounds: RawBuilder<unknown>[] = []
  if (range.from !== undefined) bounds.push(sql`id >= ${firstIdAt(range.from)}`, sql`request_time >= ${range.from}`)
  if (range.to !== undefined) bounds.push(sql`id < ${firstIdAt(range.to + 1 + idLagLimitMs)}`, sql`request_time <= ${range.to}`)
  return bounds.length === 0 ? sql<SqlBool>`1 = 1` : sql<SqlBool>`(${sql.join(bounds, sql` and `)})`
}
