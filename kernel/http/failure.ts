import { ApiError, type Refusal } from './errors.ts'
import type { Answer } from './exchange.ts'
import { isStoreOutage } from '../storage/database.ts'

export const plainText = 'text/plain; charset=utf-8'

export function errorAnswer(message: string, status: number, headers: [string, string][] = []): Answer {
  return { status, body: Buffer.from(message), contentType: plainText, headers }
}

/**
 * Issue 16 item 6 (RFC 9110 11.6.1): every 401 names the scheme and the credential items
 * a client must send, so a client that got it wrong learns how to get it right.
 */
export const wwwAuthenticate: [string, string] = ['WWW-Authenticate', 'KeygateHMAC realm="keygate", items="x-apikey x-apidate x-apihmac x-apitoday"']

/**
 * The kernel's error policy (D6): an ApiError is the client's answer as it says; an
 * unreachable database is 503 (the service recovers by itself); anything else is a bug,
 * reported and answered 500 without detail.
 */
export function failureAnswer(report: (error: unknown) => void): (error: unknown, exchange: { refusal: Refusal | null }) => Answer {
  return (error, exchange) => {
    if (ApiError.is(error)) {
      exchange.refusal = error.refusal ?? null
      const headers: [string, string][] = error.headers ? Object.entries(error.headers) : []
      if (error.status === 401) headers.push(wwwAuthenticate)
      return errorAnswer(error.message, error.status, headers)
    }
    report(error)
    if (isStoreOutage(error)) return errorAnswer('Error: Service temporarily unavailable, try again shortly.', 503, [['Retry-After', '2']])
    return errorAnswer('Error: Internal error.', 500)
  }
}
