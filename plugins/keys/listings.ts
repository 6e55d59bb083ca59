import { creditState, httpDate, type Call, type KernelServices, type KeyRecord } from '../../kernel/sdk.ts'
import { assignableGroups, type GroupRecord } from './groupRules.ts'

/** One key of GET /Api/Read/Keys: its fields as create/edit take them, never its secret. */
export interface KeyListing {
  Id: number
  Api_Key: string
  Display_Name: string
  Email: string | null
  Phone: string | null
  Parent: number
  Custno: number
  /** HTTP-dates (D9); null when not set. */
  StartDate: string | null
  EndDate: string | null
  /** 1 when the key works now: StartDate <= now < EndDate (interface 3). */
  Active: 0 | 1
  DayPass: number
  Require_Https: number
  AllowHours: number | null
  ResponseFormat: string
  LogLevel: number
  LogRaw: number
  MaxHits: string
  Require_Hash: number | null
  Groups: { Id: number; Display_Name: string }[]
  Created: string
  /** Calls left now (a due refill counted); null = unlimited (issue 16). */
  Credits: number | null
  Refill: { Amount: number; Every: '1Day' | '1Mon' } | null
}

/** A listing's CSV header, also when the caller created no keys. */
export const keyListingColumns = ['Id', 'Api_Key', 'Display_Name', 'Email', 'Phone', 'Parent', 'Custno', 'StartDate', 'EndDate', 'Active', 'DayPass', 'Require_Https',
  'AllowHours', 'ResponseFormat', 'LogLevel', 'LogRaw', 'MaxHits', 'Require_Hash', 'Groups', 'Created', 'Credits', 'Refill'] as const satisfies readonly (keyof KeyListing)[]

const nullableNumber = (value: number | null) => (value === null ? null : Number(value))
const nullableDate = (value: number | null) => (value === null ? null : httpDate(Number(value)))

export function isActive(row: Pick<KeyRecord, 'start_date' | 'end_date'>, now: number): boolean {
  return (row.start_date === null || Number(row.start_date) <= now) && (row.end_date === null || now < Number(row.end_date))
}

function keyListing(row: KeyRecord, groups: KeyListing['Groups'], now: number): KeyListing {
  return {
    Id: Number(row.id),
    Api_Key: row.api_key,
    Display_Name: row.display_name,
    Email: row.email,
    Phone: row.phone,
    Parent: Number(row.parent),
    Custno: Number(row.custno),
    StartDate: nullableDate(row.start_date),
    EndDate: nullableDate(row.end_date),
    Active: isActive(row, now) ? 1 : 0,
    DayPass: Number(row.day_pass),
    Require_Https: Number(row.require_https),
    AllowHours: nullableNumber(row.allow_hours),
    ResponseFormat: row.response_format,
    LogLevel: Number(row.log_level),
    LogRaw: Number(row.log_raw),
    MaxHits: row.max_hits ?? '',
    Require_Hash: nullableNumber(row.require_hash),
    Groups: groups,
    Created: httpDate(Number(row.created_at)),
    ...creditFields(row, now),
  }
}

function creditFields(row: KeyRecord, now: number): Pick<KeyListing, 'Credits' | 'Refill'> {
  const state = creditState(row, now)
  return { Credits: state.credits, Refill: state.refill }
}

/** GET /Api/Read/Keys: the keys the caller's key created (interface 4.6). */
export async function readKeys(kernel: KernelServices, call: Call): Promise<KeyListing[]> {
  const { keys, groups } = await kernel.keys.createdBy(call.caller.id)
  const now = kernel.clock()
  return keys.map((row) => keyListing(row, groups.get(Number(row.id)) ?? [], now))
}

/** GET/POST /Api/Read/Groups: the groups the caller may assign (D9). */
export function readGroups(kernel: KernelServices, call: Call<unknown>): Promise<GroupRecord[]> {
  return assignableGroups(kernel, call.caller.id)
}

/** CSV of a group list: one row per group, its paths in one comma-separated cell (as /account/read/group). */
export function groupRows(groups: GroupRecord[]): unknown[] {
  return groups.map((group) => ({ ...group, Paths: group.Paths.join(',') }))
}

/** XML of the key listing: each key's groups as `<Groups><Group>…</Group></Groups>`, as the other group lists. */
export function keysWithGroupItems(keys: KeyListing[]): unknown[] {
  return keys.map((key) => ({ ...key, Groups: { Group: key.Groups } }))
}
