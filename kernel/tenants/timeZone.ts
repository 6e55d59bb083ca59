/**
 * Tenant time zones: IANA names as Intl knows them (`Europe/Oslo`, `UTC`). "Today" for
 * a tenant is the calendar date at its zone, not the server's.
 */

/** One formatter per zone, made on first use: building an Intl.DateTimeFormat is costly. */
const formatters = new Map<string, Intl.DateTimeFormat>()

function formatterFor(zone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(zone)
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat('en-CA', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit' })
    formatters.set(zone, formatter)
  }
  return formatter
}

/** True when `zone` is an IANA time-zone name this Node knows. */
export function isTimeZone(zone: string): boolean {
  if (zone.trim() === '' || zone.length > 64) return false
  try {
    formatterFor(zone)
    return true
  } catch {
    return false
  }
}

export interface CalendarDay {
  year: number
  month: number
  day: number
}

/** The calendar date at `zone` at the instant `time` (epoch ms). */
export function calendarDayAt(time: number, zone: string): CalendarDay {
  const parts = formatterFor(zone).formatToParts(time)
  const part = (type: string) => Number(parts.find((item) => item.type === type)!.value)
  return { year: part('year'), month: part('month'), day: part('day') }
}
