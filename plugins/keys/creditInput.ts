import { badRequest, creditState, nextRefillAt, type KeyChanges, type KeyRecord } from '../../kernel/sdk.ts'

/**
 * Credits and Refill of create and edit, and edit's AddCredits (issue 16). Credits sets
 * the count (null: unlimited, which also ends a Refill); AddCredits tops it up; a
 * Refill given without Credits starts an unlimited (or new) key at its Amount. A
 * Refill's schedule starts anew when it is set: the next 00:00 UTC (1Day) or the next
 * 1st of a month (1Mon).
 */
export interface CreditInput {
  Credits?: number | null
  Refill?: { Amount: number; Every: '1Day' | '1Mon' } | null
  AddCredits?: number
}

export type CreditColumns = Pick<KeyChanges, 'credits' | 'refill_amount' | 'refill_every' | 'refill_at' | 'credits_set' | 'credits_set_at'>

const largestCredits = 1_000_000_000_000

/** The rules that need only the body, checked before any key is looked up. */
export function checkCreditInput(body: CreditInput): void {
  if (body.Credits !== undefined && body.AddCredits !== undefined) throw badRequest('Give Credits (sets the count) or AddCredits (adds to it), not both.')
  if (body.Credits === null && body.Refill) throw badRequest('Refill needs Credits: a key with unlimited Credits (null) has nothing to refill.')
}

/** The credit columns a body sets; `current` is the stored key (edit) or null (create). */
export function creditColumns(body: CreditInput, current: KeyRecord | null, now: number): CreditColumns {
  const columns: CreditColumns = {}
  if (body.Refill !== undefined) {
    columns.refill_amount = body.Refill?.Amount ?? null
    columns.refill_every = body.Refill?.Every ?? null
    columns.refill_at = body.Refill ? nextRefillAt(body.Refill.Every, now) : null
  }
  const stored = current === null ? null : creditState(current, now)
  if (body.Credits !== undefined) {
    columns.credits = body.Credits
    if (body.Credits === null) Object.assign(columns, { refill_amount: null, refill_every: null, refill_at: null })
  } else if (body.AddCredits !== undefined) {
    if (stored === null || stored.credits === null) throw badRequest('AddCredits needs a key with Credits; this key is unlimited (set Credits instead).')
    const total = stored.credits + body.AddCredits
    if (total > largestCredits) throw badRequest(`Credits would pass ${largestCredits}.`)
    columns.credits = total
  } else if (body.Refill && (stored === null || stored.credits === null)) {
    columns.credits = body.Refill.Amount
  } else if (body.Refill !== undefined && stored !== null && stored.credits !== null) {
    // The count as it stands now, a refill that fell due included: a new schedule does not take back what was due.
    columns.credits = stored.credits
  }
  // A refill that fell due before this change is taken now, so the next call does not overwrite what was just set.
  if (typeof columns.credits === 'number' && body.Refill === undefined && stored !== null && stored.refillAt !== null) columns.refill_at = stored.refillAt
  // The count as set, and when: credits without a Refill tell 80 % of it, once per setting (events/usageEvents.ts).
  if (columns.credits !== undefined) Object.assign(columns, { credits_set: columns.credits, credits_set_at: columns.credits === null ? null : now })
  return columns
}
