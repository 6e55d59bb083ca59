import type { Kysely } from 'kysely'
import { LRUCache } from 'lru-cache'
import type { CoreTables } from '../storage/coreTables.ts'
import type { Dialect } from '../storage/database.ts'
import { forbidden } from '../http/errors.ts'
import { limitColumns, lockBoundingRows, readEntitlement, tighterBound, type Bound, type Entitlement, type LimitedKind, type TenantScope } from './entitlements.ts'
import { UsageCounters, type UsageCounter } from './usage.ts'
import { listPlayers, type PlayerRecord } from './players.ts'

/** One more thing of a kind in a tenant: what a create or import asks room for. */
export interface Addition extends TenantScope {
  count: number
  /**
   * Moved here from another customer of the same parent (a parent-wide key changing
   * Custno): it counts for its new customer, while the parent's total is unchanged.
   */
  move?: boolean
}

export interface TenantUsage {
  Keys: number
  /** Null when no enabled plugin counts people. */
  People: number | null
  Players: number
}

/** The maxima that bound a tenant, each with the count it is judged against (GET /account/read/license). */
export interface TenantLicense {
  maxima: Pick<Entitlement, 'MaxKeys' | 'MaxPeople' | 'MaxPlayers'>
  usage: TenantUsage
}

/** A player's Last_Seen is written at most this often (a screen polls Today every few seconds). */
const seenEveryMs = 60_000

/**
 * `kernel.tenants` (D14): a tenant's entitlement and usage, the room check every create
 * runs inside its transaction, the tenant's time zone, and its display players.
 */
export class Tenants {
  private readonly counters: UsageCounters
  /** When each key last wrote its player's Last_Seen on this process (keys that are no player too: their write is a no-op). */
  private readonly lastSeenWrite = new LRUCache<number, number>({ max: 50_000 })

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly dialect: Dialect,
    private readonly clock: () => number,
    private readonly defaultTimeZone: string,
  ) {
    this.counters = new UsageCounters(clock)
  }

  /** A plugin that owns a limited kind counts it (e.g. the people plugin, 'People'). */
  countUsage(kind: string, counter: UsageCounter): void {
    this.counters.add(kind, counter)
  }

  /** The operator's settings for exactly this tenant (no row: everything unlimited). */
  entitlement(scope: TenantScope): Promise<Entitlement> {
    return readEntitlement(this.db, scope)
  }

  async usage(scope: TenantScope): Promise<TenantUsage> {
    return {
      Keys: (await this.counters.count(this.db, 'Keys', scope)) ?? 0,
      People: await this.counters.count(this.db, 'People', scope),
      Players: (await this.counters.count(this.db, 'Players', scope)) ?? 0,
    }
  }

  /**
   * Per kind, the maximum that bounds the tenant's creates and its count: the tenant's
   * own, or for a customer its parent's (Custno 0, with the whole parent's count) when
   * that leaves less room. The same rows ensureRoom checks, so a create the license
   * shows room for passes and one it shows none for is refused (racing creates aside).
   */
  async license(scope: TenantScope): Promise<TenantLicense> {
    const [ownMaxima, ownUsage] = await Promise.all([this.entitlement(scope), this.usage(scope)])
    const parentScope = { parent: scope.parent, custno: 0 }
    const parentMaxima = scope.custno === 0 ? undefined : await this.entitlement(parentScope)
    const kinds = ['Keys', 'People', 'Players'] as const
    // The whole parent is counted only when the parent limits something.
    const parentUsage = parentMaxima !== undefined && kinds.some((kind) => parentMaxima[`Max${kind}`] !== null) ? await this.usage(parentScope) : undefined
    const bound = (kind: LimitedKind): Bound => {
      const own = { max: ownMaxima[`Max${kind}`], used: ownUsage[kind] }
      if (parentMaxima === undefined || parentUsage === undefined) return own
      return tighterBound(own, { max: parentMaxima[`Max${kind}`], used: parentUsage[kind] })
    }
    const [keys, people, players] = kinds.map(bound)
    return {
      maxima: { MaxKeys: keys.max, MaxPeople: people.max, MaxPlayers: players.max },
      usage: { Keys: keys.used ?? 0, People: people.used, Players: players.used ?? 0 },
    }
  }

  /**
   * Refuses (403 `Tenant limit reached (MaxPeople 10).`) when the additions would pass
   * a maximum of their tenant or of its parent. Call it inside the transaction that
   * writes them, before that transaction's first plain read (or at READ COMMITTED on
   * MySQL): it locks the tenant's entitlement rows, so creates in one tenant count one
   * after the other and a limit is never passed by two racing creates.
   */
  async ensureRoom(db: Kysely<any>, kind: LimitedKind, additions: readonly Addition[]): Promise<void> {
    const column = limitColumns[kind]
    const parents = new Set(additions.filter((addition) => addition.count > 0).map((addition) => addition.parent))
    for (const parent of parents) {
      const ofParent = additions.filter((addition) => addition.parent === parent)
      const rows = await lockBoundingRows(db, this.dialect, parent, ofParent.map((addition) => addition.custno))
      for (const row of rows) {
        const max = row[column] === null ? null : Number(row[column])
        if (max === null) continue
        const adding = ofParent.filter((addition) => (row.custno === 0 ? !addition.move : addition.custno === row.custno)).reduce((sum, addition) => sum + addition.count, 0)
        if (adding === 0) continue
        const used = (await this.counters.count(db, kind, row)) ?? 0
        if (used + adding > max) throw forbidden(`Tenant limit reached (Max${kind} ${max}).`)
      }
    }
  }

  /** The tenant's IANA zone: its own setting, else its parent's, else config `people.timeZone`. */
  async timeZone(scope: TenantScope): Promise<string> {
    const rows = await this.db.selectFrom('tenant_entitlements').select(['custno', 'time_zone'])
      .where('parent', '=', scope.parent).where('custno', 'in', [...new Set([scope.custno, 0])])
      .where('time_zone', 'is not', null).execute()
    const own = rows.find((row) => Number(row.custno) === scope.custno) ?? rows[0]
    return own?.time_zone ?? this.defaultTimeZone
  }

  /** The tenant's players (Custno 0: every customer's), as POST /account/read/player answers. */
  async players(scope: TenantScope): Promise<PlayerRecord[]> {
    return (await listPlayers(this.db, scope)).map(({ Id, Name, DispGroup, Location, Last_Seen }) => ({ Id, Name, DispGroup, Location, Last_Seen }))
  }

  /**
   * A call made with `keyId` showed a player's screen: its Last_Seen becomes now. At
   * most one write per key per minute on this process; a failed write is not the
   * caller's problem and is dropped.
   */
  async playerSeen(keyId: number): Promise<void> {
    const now = this.clock()
    const last = this.lastSeenWrite.get(keyId)
    if (last !== undefined && now - last >= 0 && now - last < seenEveryMs) return
    this.lastSeenWrite.set(keyId, now)
    await this.db.updateTable('tenant_players').set({ last_seen: now }).where('key_id', '=', keyId).execute().catch(() => undefined)
  }
}

/** What plugins get as `kernel.tenants`: reads, the room check and usage counters; setting maxima is the operator's. */
export type TenantServices = Pick<Tenants, 'countUsage' | 'entitlement' | 'usage' | 'license' | 'ensureRoom' | 'timeZone' | 'players' | 'playerSeen'>
