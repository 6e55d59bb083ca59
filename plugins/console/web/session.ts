import type { Credentials } from './signing.ts'

/**
 * The signed-in key lives in this tab's sessionStorage only: never a cookie (the server
 * never sees it but as a signature), never the URL, never a log. Closing the tab forgets it.
 */
const credentialsItem = 'keygate.credentials'
const dayCodeItem = 'keygate.daycode'

export function storedCredentials(): Credentials | null {
  try {
    const parsed = JSON.parse(sessionStorage.getItem(credentialsItem) ?? 'null')
    return parsed && typeof parsed.apiKey === 'string' && typeof parsed.secret === 'string' ? parsed : null
  } catch {
    return null
  }
}

export function storeCredentials(credentials: Credentials): void {
  sessionStorage.setItem(credentialsItem, JSON.stringify(credentials))
}

export function forgetSession(): void {
  sessionStorage.removeItem(credentialsItem)
  sessionStorage.removeItem(dayCodeItem)
}

/** The day code changes every 4 hours (D5); kept for the tab so it is asked for once. */
export function storedDayCode(): string | null {
  return sessionStorage.getItem(dayCodeItem)
}

export function storeDayCode(code: string | null): void {
  if (code === null) sessionStorage.removeItem(dayCodeItem)
  else sessionStorage.setItem(dayCodeItem, code)
}
