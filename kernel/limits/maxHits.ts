/** One rate-limit window of a key's MaxHits (D7). */
export interface RateWindow {
  count: number
  seconds: number
  /** As written back to users: `1Sec`, `1Hour`, `1Mon`... */
  label: string
}

const unitSeconds: Record<string, number> = { sec: 1, min: 60, hour: 3600, day: 86_400, mon: 2_592_000 }
const unitNames: Record<string, string> = { sec: 'Sec', min: 'Min', hour: 'Hour', day: 'Day', mon: 'Mon' }
const windowPattern = /^(\d+)\/(\d+)(sec|min|hour|day|mon)$/i
// The largest count taken: beyond it a typo, not a limit (and past 2^53 not exact).
const maxCount = 999_999_999_999

export class MaxHitsError extends Error {}

/**
 * Parses MaxHits (D7): `<count>/<n><unit>` items joined by commas, spaces ignored,
 * units Sec, Min, Hour, Day, Mon (30 days). Empty or null means no limit ([]).
 * Shared by the keys plugin (validation) and the rate-limit stage (enforcement).
 */
export function parseMaxHits(text: string | null | undefined): RateWindow[] {
  if (text === null || text === undefined) return []
  if (text.trim() === '') return []
  const windows: RateWindow[] = []
  // Spaces are allowed anywhere; an error quotes the item as typed (a missing comma stays visible).
  for (const typed of text.split(',')) {
    const item = typed.trim()
    const match = windowPattern.exec(item.replace(/\s+/g, ''))
    if (!match) throw new MaxHitsError(`MaxHits item '${item}' is not of the form <count>/<n><Sec|Min|Hour|Day|Mon>, e.g. 10/1Sec,1000/1Hour`)
    const count = Number(match[1])
    const length = Number(match[2])
    const unit = match[3].toLowerCase()
    if (count < 1 || length < 1) throw new MaxHitsError(`MaxHits item '${item}' needs a count and a window of at least 1`)
    if (count > maxCount) throw new MaxHitsError(`MaxHits item '${item}' has a count over ${maxCount}`)
    const seconds = length * unitSeconds[unit]
    if (seconds > 366 * 86_400) throw new MaxHitsError(`MaxHits item '${item}' has a window longer than a year`)
    const label = `${length}${unitNames[unit]}`
    if (windows.some((window) => window.seconds === seconds)) throw new MaxHitsError(`MaxHits names the window ${label} twice`)
    windows.push({ count, seconds, label })
  }
  return windows.sort((a, b) => a.seconds - b.seconds)
}

/** The canonical spelling stored and returned, e.g. `10/1Sec,1000/1Hour`. */
export function formatMaxHits(windows: RateWindow[]): string {
  return windows.map((window) => `${window.count}/${window.label}`).join(',')
}
