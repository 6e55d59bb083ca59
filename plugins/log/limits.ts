import { httpDate, type CallerKey, type CreditStatus, type TenantWindowStatus, type WindowStatus } from '../../kernel/sdk.ts'

/** The state of a key's rate limits, its tenant's quotas and its credits, as GET /Api/Read/Limits and POST /Api/Read/Usage answer it. */

const timeUnits: [seconds: number, singular: string, plural: string][] = [
  [86_400, 'Day', 'Days'],
  [3600, 'Hour', 'Hours'],
  [60, 'Minute', 'Minutes'],
]

/** `"42 Seconds"`, `"5 Minutes"`, `"3 Hours"`, `"12 Days"`: whole units, rounded up, so it never says 0 while a wait remains. */
export function timeLeftText(milliseconds: number): string {
  const seconds = Math.max(0, Math.ceil(milliseconds / 1000))
  for (const [unit, singular, plural] of timeUnits) {
    // Switch to a unit only when it still says something precise enough (2 or more).
    if (seconds >= 2 * unit) {
      const count = Math.ceil(seconds / unit)
      return `${count} ${count === 1 ? singular : plural}`
    }
  }
  return `${seconds} ${seconds === 1 ? 'Second' : 'Seconds'}`
}

/** The D7 shape of GET /api/read/limits, one member per window in MaxHits order. */
export function limitsAnswer(windows: WindowStatus[], now: number): Record<string, { Limit: number; Remain: number; ResetDate: string; TimeLeft: string }> {
  const answer: Record<string, { Limit: number; Remain: number; ResetDate: string; TimeLeft: string }> = {}
  for (const status of windows) {
    answer[status.window.label] = {
      Limit: status.window.count,
      Remain: status.remaining,
      ResetDate: httpDate(status.resetAt),
      TimeLeft: timeLeftText(status.resetAt - now),
    }
  }
  return answer
}

type WindowAnswer = ReturnType<typeof limitsAnswer>[string]

/**
 * GET /Api/Read/Limits in full (issue 16): the key's windows as D7 has them, then, only
 * when there are any, `Tenant` (its own tenant's quota) and `ParentTenant` (the whole
 * parent's, for a key of a customer) in the same per-window shape, and `Credits`.
 */
export interface FullLimits {
  [window: string]: WindowAnswer | Record<string, WindowAnswer> | CreditsAnswer
}

interface CreditsAnswer {
  /** Calls left now. */
  Remain: number
  Refill: { Amount: number; Every: string } | null
  /** The next refill; null without a Refill. */
  RefillDate: string | null
  TimeLeft: string | null
}

export function fullLimitsAnswer(caller: CallerKey, windows: WindowStatus[], tenants: TenantWindowStatus[], credits: CreditStatus, now: number): FullLimits {
  const answer: FullLimits = limitsAnswer(windows, now)
  for (const tenant of tenants) answer[tenant.custno === caller.custno ? 'Tenant' : 'ParentTenant'] = limitsAnswer(tenant.windows, now)
  if (credits.credits !== null) {
    answer.Credits = {
      Remain: credits.credits,
      Refill: credits.refill,
      RefillDate: credits.refillAt === null ? null : httpDate(credits.refillAt),
      TimeLeft: credits.refillAt === null ? null : timeLeftText(credits.refillAt - now),
    }
  }
  return answer
}

/**
 * The limits answer as one record per window, for XML and CSV: the key's windows by
 * label, the tenant's as `Tenant 1Mon` (`ParentTenant 1Mon`), and the credits as
 * `Credits` (Limit the refill Amount, ResetDate the next refill).
 */
export function windowRows(answer: FullLimits) {
  const rows: Record<string, unknown>[] = []
  for (const [name, value] of Object.entries(answer)) {
    if (name === 'Credits') {
      const credits = value as CreditsAnswer
      rows.push({ Window: 'Credits', Limit: credits.Refill?.Amount ?? null, Remain: credits.Remain, ResetDate: credits.RefillDate, TimeLeft: credits.TimeLeft })
    } else if (name === 'Tenant' || name === 'ParentTenant') {
      for (const [label, status] of Object.entries(value as Record<string, WindowAnswer>)) rows.push({ Window: `${name} ${label}`, ...status })
    } else {
      rows.push({ Window: name, ...(value as WindowAnswer) })
    }
  }
  return rows
}


/** The credits of a key without Credits (unlimited). */
export const noCredits: CreditStatus = { credits: null, refill: null, refillAt: null }
