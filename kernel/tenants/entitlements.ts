import type { Kysely, Selectable } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import type { Dialect } from '../storage/database.ts'
import { recordChange } from '../audit/auditTrail.ts'

/**
 * The operator's per-tenant settings (D14): the maxima of keys, people and players and
 * the tenant's time zone. A row for (Parent, 0) holds for the whole parent, every
 * customer of it together; a row for (Parent, Custno) for that customer alone. No row,
 * or a null column, means unlimited (or the configured default zone).
 */

/** A tenant, D9: Custno 0 is parent-wide. */
export interface TenantScope {
  parent: number
  custno: number
}

/** What is limited: the license's counts carry the same names. */
export type LimitedKind = 'Keys' | 'People' | 'Players'

export interface Entitlement {
  MaxKeys: number | null
  MaxPeople: number | null
  MaxPlayers: number | null
  /** The tenant's own zone; null = the configured default. */
  TimeZone: string | null
  /** Tenant-wide MaxHits (D7 grammar, canonical spelling): every call of every key of the tenant counts (issue 16). */
  MaxHits: string | null
}

export const limitColumns = { Keys: 'max_keys', People: 'max_people', Players: 'max_players' } as const satisfies Record<LimitedKind, keyof CoreTables['tenant_entitlements']>

type EntitlementRow = Selectable<CoreTables['tenant_entitlements']>

export const unlimited: Entitlement = { MaxKeys: null, MaxPeople: null, MaxPlayers: null, TimeZone: null, MaxHits: null }

const nullableNumber = (value: number | null) => (value === null ? null : Number(value))

function entitlementOf(row: EntitlementRow | undefined): Entitlement {
  if (row === undefined) return unlimited
  return { MaxKeys: nullableNumber(row.max_keys), MaxPeople: nullableNumber(row.max_people), MaxPlayers: nullableNumber(row.max_players), TimeZone: row.time_zone, MaxHits: row.max_hits ?? null }
}

export async function readEntitlement(db: Kysely<CoreTables>, scope: TenantScope): Promise<Entitlement> {
  const row = await db.selectFrom('tenant_entitlements').selectAll()
    .where('parent', '=', scope.parent).where('custno', '=', scope.custno).executeTakeFirst()
  return entitlementOf(row)
}

/** A maximum (null = unlimited) and the count it is judged against (null: nothing counts that kind). */
export interface Bound {
  max: number | null
  used: number | null
}

const room = (bound: Bound) => (bound.max === null ? Infinity : bound.max - (bound.used ?? 0))

/**
 * Of a customer's own bound and its parent's (Custno 0, counting the whole parent),
 * the one that refuses a create first: the one with less room left. On a tie the
 * customer's own, whose count is its own. ensureRoom checks both, so this is what
 * the license must show for the 403 to be foreseeable.
 */
export function tighterBound(own: Bound, parent: Bound): Bound {
  return room(parent) < room(own) ? parent : own
}

/** The changed settings only; undefined leaves a setting as it is, null clears it. */
export type EntitlementChange = Partial<Entitlement>

/**
 * Writes the operator's change, creating the tenant's row on first use; answers the
 * result and whether anything changed. A change to the values already in force writes
 * nothing, so it leaves no audit record either.
 */
export async function changeEntitlement(db: Kysely<CoreTables>, scope: TenantScope, change: EntitlementChange, now: number): Promise<{ entitlement: Entitlement; changed: boolean }> {
  return db.transaction().execute(async (trx) => {
    const current = await readEntitlement(trx, scope)
    const next: Entitlement = { ...current, ...Object.fromEntries(Object.entries(change).filter(([, value]) => value !== undefined)) }
    if (JSON.stringify(next) === JSON.stringify(current)) return { entitlement: current, changed: false }
    const columns = { max_keys: next.MaxKeys, max_people: next.MaxPeople, max_players: next.MaxPlayers, time_zone: next.TimeZone, max_hits: next.MaxHits, updated_at: now }
    const updated = await trx.updateTable('tenant_entitlements').set(columns)
      .where('parent', '=', scope.parent).where('custno', '=', scope.custno).executeTakeFirst()
    // MySQL counts only rows whose values changed; a row that exists is found either way.
    const exists = Number(updated.numUpdatedRows) > 0 || (await trx.selectFrom('tenant_entitlements').select('parent')
      .where('parent', '=', scope.parent).where('custno', '=', scope.custno).executeTakeFirst()) !== undefined
    if (!exists) await trx.insertInto('tenant_entitlements').values({ parent: scope.parent, custno: scope.custno, ...columns }).execute()
    // The operator's change and its audit record commit together (issue 16).
    await recordChange(trx, now, { who: null, parent: scope.parent, custno: scope.custno, action: 'tenant.set', before: { ...current }, after: { ...next } })
    return { entitlement: next, changed: true }
  })
}

/**
 * The entitlement rows that bound a write into `scopes` (each scope's own row and its
 * parent's), locked on MySQL until the caller's transaction ends, so two creates in one
 * tenant count one after the other. Run it before the transaction's first plain read:
 * on MySQL the transaction's snapshot then starts after the lock.
 */
export async function lockBoundingRows(trx: Kysely<CoreTables>, dialect: Dialect, parent: number, custnos: readonly number[]): Promise<(EntitlementRow & TenantScope)[]> {
  const wanted = [...new Set([0, ...custnos])]
  const rows = await trx.selectFrom('tenant_entitlements').selectAll()
    .where('parent', '=', parent).where('custno', 'in', wanted)
    .$if(dialect === 'mysql', (query) => query.forUpdate())
    .execute()
  return rows.map((row) => ({ ...row, parent: Number(row.parent), custno: Number(row.custno) }))
}
