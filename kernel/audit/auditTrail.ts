import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { httpDate } from '../auth/apiDate.ts'
import { auditFields } from './auditFields.ts'

/**
 * The audit trail (issue 16 item 4): one record per administrative change, written with
 * `recordChange` inside the change's own transaction, so there is no change without its
 * record and no record without its change. Fields that hold secrets never get here.
 */
export interface AuditChange {
  /** The key that made the change; null: the operator (CLI on the server). */
  who: number | null
  /** The tenant whose object changed. */
  parent: number
  custno: number
  /** e.g. 'key.create', 'key.edit', 'key.rotate'. */
  action: string
  keyId?: number | null
  before?: Record<string, unknown> | null
  after?: Record<string, unknown> | null
  requestId?: number | null
}

/** Column names that never enter an audit record, whatever the caller passes. */
const secretColumns = new Set(['secret_enc', 'prev_secret_enc', 'secret', 'Api_Secret'])

function withoutSecrets(fields: Record<string, unknown> | null | undefined): string | null {
  if (!fields) return null
  const kept: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(fields)) if (!secretColumns.has(name)) kept[name] = value
  return JSON.stringify(kept)
}

export async function recordChange(trx: Kysely<CoreTables>, at: number, change: AuditChange): Promise<void> {
  await trx.insertInto('api_audit').values({
    at,
    who_key_id: change.who,
    parent: change.parent,
    custno: change.custno,
    action: change.action,
    key_id: change.keyId ?? null,
    before: withoutSecrets(change.before),
    after: withoutSecrets(change.after),
    request_id: change.requestId ?? null,
  }).execute()
}

/** The fields of `after` that differ from `before`, each side with its own value. */
export function changedFields(before: Record<string, unknown>, after: Record<string, unknown>): { before: Record<string, unknown>; after: Record<string, unknown> } {
  const was: Record<string, unknown> = {}
  const is: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(after)) {
    if (name === 'updated_at' || secretColumns.has(name)) continue
    const old = before[name] ?? null
    if (JSON.stringify(old) === JSON.stringify(value ?? null)) continue
    was[name] = old
    is[name] = value ?? null
  }
  return { before: was, after: is }
}

export interface AuditQuery {
  parent: number
  /** null: every customer of the parent (an administrator with Custno 0). */
  custno: number | null
  keyId?: number
  from?: number
  /** The last millisecond taken in (inclusive). */
  to?: number
  page: number
  size: number
}

export interface AuditRecord {
  Id: number
  At: string
  Who: number | 'operator'
  Parent: number
  Custno: number
  Action: string
  KeyId: number | null
  Before: unknown
  After: unknown
  RequestId: number | null
}

/** A tenant's records, newest first, one page at a time. */
export async function readAudit(db: Kysely<CoreTables>, query: AuditQuery): Promise<{ Total: number; Page: number; Records: AuditRecord[] }> {
  let select = db.selectFrom('api_audit').where('parent', '=', query.parent)
  if (query.custno !== null) select = select.where('custno', '=', query.custno)
  if (query.keyId !== undefined) select = select.where('key_id', '=', query.keyId)
  if (query.from !== undefined) select = select.where('at', '>=', query.from)
  if (query.to !== undefined) select = select.where('at', '<=', query.to)
  const [{ total }] = await select.select((eb) => eb.fn.countAll<number>().as('total')).execute()
  const rows = await select.selectAll().orderBy('id', 'desc').limit(query.size).offset((query.page - 1) * query.size).execute()
  return {
    Total: Number(total),
    Page: query.page,
    Records: rows.map((row) => ({
      Id: Number(row.id),
      At: httpDate(Number(row.at)),
      Who: row.who_key_id === null ? 'operator' : Number(row.who_key_id),
      Parent: Number(row.parent),
      Custno: Number(row.custno),
      Action: row.action,
      KeyId: row.key_id === null ? null : Number(row.key_id),
      Before: row.before === null ? null : auditFields(JSON.parse(row.before)),
      After: row.after === null ? null : auditFields(JSON.parse(row.after)),
      RequestId: row.request_id === null ? null : Number(row.request_id),
    })),
  }
}

/** Deletes records older than the retention, a batch at a time (the background purge). */
export async function purgeAudit(db: Kysely<CoreTables>, before: number, batch = 1000): Promise<number> {
  let deleted = 0
  for (;;) {
    const rows = await db.selectFrom('api_audit').select('id').where('at', '<', before).orderBy('at').limit(batch).execute()
    if (rows.length === 0) return deleted
    await db.deleteFrom('api_audit').where('id', 'in', rows.map((row) => Number(row.id))).execute()
    deleted += rows.length
  }
}
