import type { Addition, CallerKey, ExpressionBuilder, KernelServices, Kysely } from '../../kernel/sdk.ts'
import type { PeopleTables } from './tables.ts'

/** Our tables: what `kernel.db.withTables<PeopleTables>()` gives. */
export type PeopleDatabase = PeopleTables
export type PeopleDb = Kysely<PeopleDatabase>

/**
 * The tenant a call acts for (D9): the calling key's (Parent, Custno). Custno 0 is
 * parent-wide: it sees and changes the people of every Custno of its Parent.
 */
export interface Scope {
  parent: number
  custno: number
}

export function scopeOf(caller: CallerKey): Scope {
  return { parent: caller.parent, custno: caller.custno }
}

/**
 * The condition that keeps a query on `people` inside the scope: `query.where(inScope(scope))`.
 * Every query on people goes through this, so no route can forget the tenant.
 */
export function inScope(scope: Scope) {
  return (eb: ExpressionBuilder<PeopleDatabase, 'people'>) =>
    scope.custno === 0
      ? eb('people.parent', '=', scope.parent)
      : eb.and([eb('people.parent', '=', scope.parent), eb('people.custno', '=', scope.custno)])
}

/** The response-cache partition of a scope's listings. */
export function listingPartition(scope: Scope): string {
  return `people:${scope.parent}:${scope.custno}`
}

/**
 * Drops the cached listings that can show people of `custnos` under `parent`: each
 * customer's own partition, and the parent-wide (Custno 0) partition, which shows them all.
 */
export function dropCachedListings(kernel: KernelServices, parent: number, custnos: Iterable<number>): void {
  kernel.cache.invalidate(listingPartition({ parent, custno: 0 }))
  for (const custno of new Set(custnos)) kernel.cache.invalidate(listingPartition({ parent, custno }))
}

/**
 * The tenant's MaxPeople (D14), checked inside the transaction that adds people:
 * 403 and nothing written when the additions would pass it.
 */
export type PeopleRoom = (trx: Kysely<any>, additions: Addition[]) => Promise<void>

export function peopleRoom(kernel: KernelServices): PeopleRoom {
  return (trx, additions) => kernel.tenants.ensureRoom(trx, 'People', additions)
}

/** People in use for the license and MaxPeople: everyone not deleted (terminated people stay in the directory). */
export async function countPeople(db: Kysely<any>, scope: Scope): Promise<number> {
  const row = await (db as PeopleDb).selectFrom('people').select((eb) => eb.fn.countAll<number>().as('count'))
    .where(inScope(scope)).where('deleted', '=', 0).executeTakeFirstOrThrow()
  return Number(row.count)
}
