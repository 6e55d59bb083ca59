import { httpDate } from '../auth/apiDate.ts'
import { keyApiFields } from '../auth/keyFieldNames.ts'
import type { KernelEvent } from './events.ts'

/** The columns of a key an event describes (never a secret). */
interface KeyRow {
  id: number
  display_name: string
  parent: number
  custno: number
  end_date: number | null
}

function keyData(row: KeyRow): Record<string, unknown> {
  return { KeyId: Number(row.id), Name: row.display_name, Parent: Number(row.parent), Custno: Number(row.custno) }
}

/** Whether a key with this EndDate has ended by `now` (null: it never ends). */
export const endsBy = (endDate: number | null | undefined, now: number) => endDate !== null && endDate !== undefined && Number(endDate) <= now

/**
 * An edit of a key: `key.disabled` when it ends a key that was in use (EndDate set to
 * now or earlier), otherwise `key.changed` naming the changed fields. Told to the
 * tenant the key belonged to before the edit.
 */
export function keyChangeEvent(before: KeyRow, after: { end_date?: number | null }, changed: Record<string, unknown>, now: number): KernelEvent {
  const disabled = !endsBy(before.end_date, now) && endsBy(after.end_date, now)
  const fields = [...new Set(Object.keys(changed).map((name) => keyApiFields[name] ?? name))]
  // The key's name as it is now: a rename names the new one.
  const key = { ...keyData(before), Name: typeof changed.display_name === 'string' ? changed.display_name : before.display_name }
  return disabled
    ? { type: 'key.disabled', parent: Number(before.parent), custno: Number(before.custno), data: { ...key, EndDate: httpDate(Number(after.end_date)) } }
    : { type: 'key.changed', parent: Number(before.parent), custno: Number(before.custno), data: { ...key, Changed: fields } }
}

/** A new secret for a key: when the old one stops signing. */
export function keyRotatedEvent(row: KeyRow, oldSecretEnds: number): KernelEvent {
  return { type: 'key.rotated', parent: Number(row.parent), custno: Number(row.custno), data: { ...keyData(row), OldSecretEnds: httpDate(oldSecretEnds) } }
}

/** A key's EndDate is `days` days or less away (7, then 1): once per key, EndDate and warning. */
export function keyExpiringEvent(row: KeyRow, days: number): KernelEvent {
  const endDate = Number(row.end_date)
  return {
    type: 'key.expiring',
    parent: Number(row.parent),
    custno: Number(row.custno),
    data: { ...keyData(row), EndDate: httpDate(endDate), Days: days },
    once: `key.expiring:${row.id}:${endDate}:${days}`,
  }
}
