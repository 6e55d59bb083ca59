import { httpDate } from '../auth/apiDate.ts'
import type { KernelEvent } from './events.ts'

/** The columns of a key an event describes (never a secret). */
interface KeyRow {
  id: number
  display_name: string
  parent: number
  custno: number
  end_date: number | null
}

/** Column names of api_keys as the API spells them (interface 2.1; issue 16 for credits). */
const apiFieldOf: Record<string, string> = {
  display_name: 'Display_Name', email: 'Email', phone: 'Phone', start_date: 'StartDate', end_date: 'EndDate',
  day_pass: 'DayPass', require_https: 'Require_Https', allow_hours: 'AllowHours', response_format: 'ResponseFormat',
  log_level: 'LogLevel', log_raw: 'LogRaw', max_hits: 'MaxHits', require_hash: 'Require_Hash', parent: 'Parent',
  custno: 'Custno', credits: 'Credits', refill_amount: 'Refill', refill_every: 'Refill', groups: 'GroupId',
}

function keyData(row: KeyRow): Record<string, unknown> {
  return { KeyId: Number(row.id), Name: row.display_name, Parent: Number(row.parent), Custno: Number(row.custno) }
}

const endsBy = (endDate: number | null | undefined, now: number) => endDate !== null && endDate !== undefined && Number(endDate) <= now

/**
 * An edit of a key: `key.disabled` when it ends a key that was in use (EndDate set to
 * now or earlier), otherwise `key.changed` naming the changed fields. Told to the
 * tenant the key belonged to before the edit.
 */
export function keyChangeEvent(before: KeyRow, after: { end_date?: number | null }, changed: Record<string, unknown>, now: number): KernelEvent {
  const disabled = !endsBy(before.end_date, now) && endsBy(after.end_date, now)
  const fields = [...new Set(Object.keys(changed).map((name) => apiFieldOf[name] ?? name))]
  return disabled
    ? { type: 'key.disabled', parent: Number(before.parent), custno: Number(before.custno), data: { ...keyData(before), EndDate: httpDate(Number(after.end_date)) } }
    : { type: 'key.changed', parent: Number(before.parent), custno: Number(before.custno), data: { ...keyData(before), Changed: fields } }
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
