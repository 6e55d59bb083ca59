import { badRequest, formatMaxHits, MaxHitsError, nameProblem, oneLineProblem, parseInputDate, parseMaxHits, type KeyChanges } from '../../kernel/sdk.ts'
import type { KeyFieldsInput } from './schemas.ts'

/** The api_keys columns a create or edit body sets (group and tenant columns apart). */
export type KeyColumns = Pick<
  KeyChanges,
  'display_name' | 'email' | 'phone' | 'start_date' | 'end_date' | 'day_pass' | 'require_https' | 'allow_hours' | 'response_format' | 'log_level' | 'log_raw' | 'max_hits' | 'require_hash'
>

/** Refuses a tab, a line break or any other control character in a one-line field. */
function checkOneLine(field: string, value: string): string {
  const problem = oneLineProblem(value)
  if (problem !== null) throw badRequest(`${field} ${problem}.`)
  return value
}

/**
 * Display_Name keeps the one name rule the operator CLI keeps too (kernel/http/nameRule.ts):
 * no control characters, no white space at either end (unique by exact comparison on
 * both databases), a visible character.
 */
function checkDisplayName(value: string): string {
  const problem = nameProblem(value)
  if (problem !== null) throw badRequest(`Display_Name ${problem}.`)
  return value
}

function optionalText(field: string, value: string | null): string | null {
  if (value === null || value === '') return null
  return checkOneLine(field, value)
}

function inputDate(field: string, value: string | null): number | null {
  if (value === null || value === '') return null
  const time = parseInputDate(value)
  if (time === null) throw badRequest(`${field} must be an HTTP-date (Sun, 22 Nov 2026 08:49:37 GMT) or RFC 3339 (2026-11-22T08:49:37Z).`)
  return time
}

/** MaxHits in its canonical spelling (D7), null for no limit. */
function maxHitsColumn(value: string | null): string | null {
  try {
    const windows = parseMaxHits(value)
    return windows.length === 0 ? null : formatMaxHits(windows)
  } catch (error) {
    if (error instanceof MaxHitsError) throw badRequest(error.message)
    throw error
  }
}

/**
 * The columns a body sets, checked and converted; a field left out sets nothing (edit
 * keeps the stored value, create takes the column's default). An empty string or null
 * clears an optional text, date or MaxHits.
 */
export function keyColumns(body: KeyFieldsInput): KeyColumns {
  const columns: KeyColumns = {}
  if (body.Display_Name !== undefined) columns.display_name = checkDisplayName(body.Display_Name)
  if (body.Email !== undefined) columns.email = optionalText('Email', body.Email)
  if (body.Phone !== undefined) columns.phone = optionalText('Phone', body.Phone)
  if (body.StartDate !== undefined) columns.start_date = inputDate('StartDate', body.StartDate)
  if (body.EndDate !== undefined) columns.end_date = inputDate('EndDate', body.EndDate)
  if (body.DayPass !== undefined) columns.day_pass = body.DayPass
  if (body.Require_Https !== undefined) columns.require_https = body.Require_Https
  if (body.AllowHours !== undefined) columns.allow_hours = body.AllowHours
  if (body.ResponseFormat !== undefined) columns.response_format = body.ResponseFormat
  if (body.LogLevel !== undefined) columns.log_level = body.LogLevel
  if (body.LogRaw !== undefined) columns.log_raw = body.LogRaw
  if (body.MaxHits !== undefined) columns.max_hits = maxHitsColumn(body.MaxHits)
  if (body.Require_Hash !== undefined) columns.require_hash = body.Require_Hash
  if (columns.start_date != null && columns.end_date != null && columns.end_date <= columns.start_date) {
    // Only when both come in one body: an edit that sets EndDate alone is a disable,
    // valid whatever the stored StartDate.
    throw badRequest('EndDate must be after StartDate.')
  }
  return columns
}

/** The exact 400 text of interface 4.1 for a taken Display_Name. */
export function nameTaken(name: string) {
  return badRequest(`Display Name '${name}' is already defined.`)
}
