import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import type { LimitedKind, TenantScope } from './entitlements.ts'

/**
 * How much of an entitlement a tenant uses. The kernel counts its own rows (keys,
 * players); a plugin that owns a limited kind registers a counter for it at setup
 * (`kernel.tenants.countUsage('People', ...)`), and the license sums every counter of a kind.
 * A scope with Custno 0 counts the whole parent.
 */
export type UsageCounter = (db: Kysely<any>, scope: TenantScope) => Promise<number>

/**
 * Keys in use: keys not ended (a disabled key frees its place), and not a player's key
 * (those count as players).
 */
export function keyCounter(clock: () => number): UsageCounter {
  return async (db: Kysely<CoreTables>, scope) => {
    const now = clock()
    const row = await db.selectFrom('api_keys as k')
      .leftJoin('tenant_players as p', 'p.key_id', 'k.id')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('k.parent', '=', scope.parent)
      .$if(scope.custno !== 0, (query) => query.where('k.custno', '=', scope.custno))
      .where('p.id', 'is', null)
      .where((eb) => eb.or([eb('k.end_date', 'is', null), eb('k.end_date', '>', now)]))
      .executeTakeFirstOrThrow()
    return Number(row.count)
  }
}

export const playerCounter: UsageCounter = async (db: Kysely<CoreTables>, scope) => {
  const row = await db.selectFrom('tenant_players').select((eb) => eb.fn.countAll<number>().as('count'))
    .where('parent', '=', scope.parent)
    .$if(scope.custno !== 0, (query) => query.where('custno', '=', scope.custno))
    .executeTakeFirstOrThrow()
  return Number(row.count)
}

/** The counters of each kind; the kernel's own are there from the start. */
export class UsageCounters {
  private readonly counters = new Map<string, UsageCounter[]>()

  constructor(clock: () => number) {
    this.add('Keys', keyCounter(clock))
    this.add('Players', playerCounter)
  }

  add(kind: string, counter: UsageCounter): void {
    const list = this.counters.get(kind) ?? []
    list.push(counter)
    this.counters.set(kind, list)
  }

  /** Null when nothing counts this kind (its plugin is not enabled). */
  async count(db: Kysely<any>, kind: LimitedKind | string, scope: TenantScope): Promise<number | null> {
    const list = this.counters.get(kind)
    if (list === undefined) return null
    let total = 0
    for (const counter of list) total += await counter(db, scope)
    return total
  }
}
