const imfFixdate = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/
const rfc3339Utc = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:Z|[+-]00:00)$/i
const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
const weekdays = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']

function checkedUtc(year: number, month: number, day: number, hour: number, minute: number, second: number): number | null {
  const date = new Date(Date.UTC(2000, month, day, hour, minute, second))
  // Set apart: Date.UTC reads the years 0-99 as 1900-1999.
  date.setUTCFullYear(year, month, day)
  const time = date.getTime()
  // Date.UTC rolls 31 Feb over to March; a real date survives the round trip.
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month || date.getUTCDate() !== day) return null
  if (hour > 23 || minute > 59 || second > 59) return null
  return time
}

/**
 * Parses an x-apidate (D3): IMF-fixdate (`Sun, 22 Nov 2026 08:49:37 GMT`) or RFC 3339
 * UTC (`2026-11-22T08:49:37Z`; `+00:00` and `-00:00` are UTC too). Returns epoch ms, or
 * null for anything else (another offset included: D3 asks for UTC).
 */
export function parseApiDate(text: string): number | null {
  let match = imfFixdate.exec(text)
  if (match) {
    const time = checkedUtc(Number(match[4]), months.indexOf(match[3]), Number(match[2]), Number(match[5]), Number(match[6]), Number(match[7]))
    if (time === null || weekdays[new Date(time).getUTCDay()] !== match[1]) return null
    return time
  }
  match = rfc3339Utc.exec(text)
  if (match) {
    const time = checkedUtc(Number(match[1]), Number(match[2]) - 1, Number(match[3]), Number(match[4]), Number(match[5]), Number(match[6]))
    if (time === null) return null
    return time + (match[7] ? Math.floor(Number(`0.${match[7]}`) * 1000) : 0)
  }
  return null
}

const firstInputTime = Date.parse('0000-01-01T00:00:00Z')
const lastInputTime = Date.parse('9999-12-31T23:59:59.999Z')

const inputDatePattern = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(Z|[+-]\d{2}:\d{2}))?$/i

/** Input dates of key fields (D9): HTTP-date, or RFC 3339 with a zone (or a bare date, taken as UTC midnight). */
export function parseInputDate(text: string): number | null {
  const strict = parseApiDate(text)
  if (strict !== null) return strict
  const match = inputDatePattern.exec(text)
  if (!match) return null
  // The calendar check runs on the local fields, before the zone shifts them.
  if (checkedUtc(Number(match[1]), Number(match[2]) - 1, Number(match[3]), Number(match[4] ?? 0), Number(match[5] ?? 0), Number(match[6] ?? 0)) === null) return null
  if (match[7] && match[7].length === 6 && (Number(match[7].slice(1, 3)) > 23 || Number(match[7].slice(4)) > 59)) return null
  const time = Date.parse(match[4] === undefined ? `${text}T00:00:00Z` : text)
  // A zone can shift a date past year 9999 or before year 0, which an HTTP-date answer
  // cannot show (nor the service read back): such an instant is no date either.
  return Number.isNaN(time) || time < firstInputTime || time > lastInputTime ? null : time
}

/**
 * The last millisecond an input date names, for an inclusive `To` filter: a date alone
 * (YYYY-MM-DD) runs to the end of that UTC day, a time in whole seconds (as answers show
 * times) to the end of that second; null when it is not a date.
 */
export function parseInputDateUntil(text: string): number | null {
  const time = parseInputDate(text)
  if (time === null || time % 1000 !== 0) return time
  return /^\d{4}-\d\d-\d\d$/.test(text) ? time + 86_399_999 : time + 999
}

/** Dates in responses are HTTP-dates (D9). */
export function httpDate(time: number): string {
  return new Date(time).toUTCString()
}

/** Default clock window when a key's AllowHours is unset: 5 minutes (D3). */
export const defaultAllowMs = 5 * 60 * 1000

/** True when the caller's date is inside the key's window (D3); AllowHours 0 skips the check. */
export function dateWithinWindow(callerTime: number, now: number, allowHours: number | null): boolean {
  if (allowHours === 0) return true
  const allowMs = allowHours === null ? defaultAllowMs : allowHours * 3_600_000
  return Math.abs(now - callerTime) <= allowMs
}
