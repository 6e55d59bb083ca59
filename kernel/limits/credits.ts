import { sql, type Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'

/**
 * Credits (issue 16): a key's count of calls left, spent in the database so that it is
 * exact with concurrent calls and across processes and hosts (no cache holds the
 * count). A Refill sets the count back to its Amount at each UTC boundary of its
 * period: 00:00 UTC for `1Day`, 00:00 UTC on the 1st of the month for `1Mon`.
 */

export type RefillEvery = '1Day' | '1Mon'
export const refillPeriods: readonly RefillEvery[] = ['1Day', '1Mon']

export interface Refill {
  Amount: number
  Every: RefillEvery
}

/** The first refill boundary strictly after `now` (UTC). */
export function nextRefillAt(every: RefillEvery, now: number): number {
  const date = new Date(now)
  return every === '1Day'
    ? Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate() + 1)
    : Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1)
}

type CreditColumns = Pick<CoreTables['api_keys'], 'credits' | 'refill_amount' | 'refill_every' | 'refill_at'>
type StoredCredits = { [Column in keyof CreditColumns]: number | string | null }

/** A key's credits as they stand at `now`: a refill that is due counts even before a call writes it. */
export interface CreditState {
  /** Calls left; null = unlimited. */
  credits: number | null
  refill: Refill | null
  /** When the next refill sets the count back to its Amount; null without a Refill. */
  refillAt: number | null
}

export function creditState(row: StoredCredits, now: number): CreditState {
  if (row.credits === null) return { credits: null, refill: null, refillAt: null }
  const credits = Number(row.credits)
  if (row.refill_amount === null || row.refill_every === null || row.refill_at === null) return { credits, refill: null, refillAt: null }
  const refill: Refill = { Amount: Number(row.refill_amount), Every: row.refill_every as RefillEvery }
  const refillAt = Number(row.refill_at)
  return refillAt <= now
    ? { credits: refill.Amount, refill, refillAt: nextRefillAt(refill.Every, now) }
    : { credits, refill, refillAt }
}

/** The outcome of one call's spending: spent, or refused with when the count comes back (null: never by itself). */
export type Spending = { spent: true } | { spent: false; refillAt: number | null }

const spent: Spending = { spent: true }

export class CreditLedger {
  /** Told of each successful spend (issue 17's key.usage); null while no one listens. */
  spendWatcher: ((keyId: number) => void) | null = null

  constructor(private readonly db: Kysely<CoreTables>, private readonly clock: () => number) {}

  /**
   * Spends `cost` credits of a key in one atomic statement: the due refill is folded
   * in (the count becomes the Amount minus the cost, the next boundary is stored), and
   * the row changes only when enough is left, so concurrent calls on any process can
   * never spend more than there is, and a refused call spends nothing.
   */
  async spend(keyId: number, cost: number): Promise<Spending> {
    const now = this.clock()
    const due = sql`(refill_at is not null and refill_at <= ${now})`
    const available = sql`(case when ${due} then refill_amount else credits end)`
    const nextAt = sql`(case when refill_every = '1Day' then ${nextRefillAt('1Day', now)} else ${nextRefillAt('1Mon', now)} end)`
    // Before refill_at: MySQL assigns left to right, and each case must see the old refill_at.
    // A refill sets the count (credits_set, at the boundary that fell due).
    const result = await this.db.updateTable('api_keys')
      .set({
        credits: sql<number>`${available} - ${cost}`,
        credits_set: sql<number>`(case when ${due} then refill_amount else credits_set end)`,
        credits_set_at: sql<number>`(case when ${due} then refill_at else credits_set_at end)`,
        refill_at: sql<number>`(case when ${due} then ${nextAt} else refill_at end)`,
      })
      .where('id', '=', keyId)
      .where('credits', 'is not', null)
      .where(sql<boolean>`${available} >= ${cost}`)
      .executeTakeFirst()
    if (Number(result.numUpdatedRows) === 1) {
      if (this.spendWatcher !== null) this.spendWatcher(keyId)
      return spent
    }
    return this.refused(keyId, cost, now)
  }

  /** Why a spend changed nothing: the key has no count now (its Credits were cleared elsewhere), or not enough. */
  private async refused(keyId: number, cost: number, now: number): Promise<Spending> {
    const row = await this.db.selectFrom('api_keys').select(['credits', 'refill_amount', 'refill_every', 'refill_at']).where('id', '=', keyId).executeTakeFirst()
    if (row === undefined) return { spent: false, refillAt: null }
    const state = creditState(row, now)
    if (state.credits === null) return spent
    // A refill due now whose Amount is below the cost refills nothing usable: the next one is what helps.
    return { spent: false, refillAt: state.refill && state.refill.Amount >= cost ? state.refillAt : null }
  }

  /** A key's credits now (GET /Api/Read/Limits), read from the database, never from a cache. */
  async status(keyId: number): Promise<CreditState> {
    const row = await this.db.selectFrom('api_keys').select(['credits', 'refill_amount', 'refill_every', 'refill_at']).where('id', '=', keyId).executeTakeFirst()
    return row === undefined ? { credits: null, refill: null, refillAt: null } : creditState(row, this.clock())
  }
}
