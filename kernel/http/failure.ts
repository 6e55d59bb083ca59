import { ApiError, type Refusal } from './errors.ts'
import type { Answer } from './exchange.ts'
import { isStoreOutage } from '../storage/database.ts'
import { writeMayHaveLanded } from '../storage/uncertainWrites.ts'
import type { ErrorReport } from '../observe/logger.ts'

export const plainText = 'text/plain; charset=utf-8'

export function errorAnswer(message: string, status: number, headers: [string, string][] = []): Answer {
  return { status, body: Buffer.from(message), contentType: plainText, headers }
}

/**
 * Issue 16 item 6 (RFC 9110 11.6.1): every 401 names the scheme and the credential items
 * a client must send, so a client that got it wrong learns how to get it right.
 */
export const wwwAuthenticate: [string, string] = ['WWW-Authenticate', 'KeygateHMAC realm="keygate", items="x-apikey x-apidate x-apihmac x-apitoday"']

/** What failureAnswer reads of the failing call. */
interface FailingCall {
  refusal: Refusal | null
  writeUncertain: boolean
  requestId: number
  request: { method?: string }
  mounted: { route: { path: string } }
}

/**
 * The kernel's error policy (D6): an ApiError is the client's answer as it says; an
 * unreachable database is 503 (the service recovers by itself); anything else is a bug,
 * reported and answered 500 without detail.
 */
export function failureAnswer(report: ErrorReport): (error: unknown, exchange: FailingCall) => Answer {
  return (error, exchange) => {
    if (ApiError.is(error)) {
      exchange.refusal = error.refusal ?? null
      const headers: [string, string][] = error.headers ? Object.entries(error.headers) : []
      if (error.status === 401) headers.push(wwwAuthenticate)
      return errorAnswer(error.message, error.status, headers)
    }
    // The error line names the call (issue 14: errors with request id), not only its access line.
    report(error, { requestId: exchange.requestId === 0 ? null : exchange.requestId, method: exchange.request.method, route: exchange.mounted.route.path })
    if (isStoreOutage(error)) {
      exchange.writeUncertain = writeMayHaveLanded(error)
      return errorAnswer('Error: Service temporarily unavailable, try again shortly.', 503, [['Retry-After', '2']])
    }
    return errorAnswer('Error: Internal error.', 500)
  }
}
