import { httpDate } from '../auth/apiDate.ts'
import { keyApiFields } from '../auth/keyFieldNames.ts'

/**
 * An audit record's Before and After as a reader gets them: the fields as the API
 * spells them, dates as HTTP-dates (D9). Records are stored as their writers made them
 * (table column names, epoch milliseconds; the operator CLI writes the same way), so
 * the translation happens once, here, on the way out, and covers records stored by
 * earlier versions too. A name not listed (a tenant's MaxKeys, already the API's) is
 * shown as stored; a column the API has no name for is left out.
 */
const apiNames: Readonly<Record<string, string>> = {
  ...keyApiFields,
  id: 'Id', name: 'Name', created_at: 'Created', prev_secret_ends: 'OldSecretEnds',
  path: 'Path', is_public: 'Is_Public', disp_group: 'DispGroup', location: 'Location',
}

/**
 * Key columns that no key field names, left out of audit records and key events: the
 * creator is the record's `Who`, the next refill (refill_at) follows from Refill and the
 * clock, the count as set (credits_set, credits_set_at) from Credits. An edit's record
 * leaves them out when written (keyAdministration.ts); a create's, stored whole, here.
 */
export const unnamedKeyColumns: ReadonlySet<string> = new Set(['created_by', 'refill_at', 'credits_set', 'credits_set_at'])

const dateColumns = new Set(['start_date', 'end_date', 'created_at', 'prev_secret_ends'])

/** A key's Refill is two columns; the API's field is one `{ Amount, Every }` (null: none). */
const refillColumns = new Set(['refill_amount', 'refill_every'])

/** Refill from a record's two columns (records from before 0.3.5 may hold only the one an edit changed). */
function refillField(stored: Record<string, unknown>): unknown {
  if ('refill_amount' in stored && stored.refill_amount === null) return null
  return {
    ...('refill_amount' in stored ? { Amount: Number(stored.refill_amount) } : {}),
    ...('refill_every' in stored ? { Every: stored.refill_every } : {}),
  }
}

export function auditFields(stored: Record<string, unknown>): Record<string, unknown> {
  const fields: Record<string, unknown> = {}
  for (const [column, value] of Object.entries(stored)) {
    if (unnamedKeyColumns.has(column)) continue
    if (refillColumns.has(column)) {
      fields.Refill = refillField(stored)
      continue
    }
    // A key without a limit has MaxHits "" in every answer (its column holds null).
    if (column === 'max_hits' && value === null) fields.MaxHits = ''
    else fields[apiNames[column] ?? column] = dateColumns.has(column) && typeof value === 'number' ? httpDate(value) : value
  }
  return fields
}
