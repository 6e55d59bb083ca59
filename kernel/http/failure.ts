import { ApiError } from './errors.ts'
import type { Answer } from './exchange.ts'
import { isStoreOutage } from '../storage/database.ts'

export const plainText = 'text/plain; charset=utf-8'

export function errorAnswer(message: string, status: number, headers: [string, string][] = []): Answer {
  return { status, body: Buffer.from(message), contentType: plainText, headers }
}

/**
 * The kernel's error policy (D6): an ApiError is the client's answer as it says; an
 * unreachable database is 503 (the service recovers by itself); anything else is a bug,
 * reported and answered 500 without detail.
 */
export function failureAnswer(report: (error: unknown) => void): (error: unknown) => Answer {
  return (error) => {
    if (ApiError.is(error)) {
      return errorAnswer(error.message, error.status, error.headers ? Object.entries(error.headers) : [])
    }
    report(error)
    if (isStoreOutage(error)) return errorAnswer('Error: Service temporarily unavailable, try again shortly.', 503, [['Retry-After', '2']])
    return errorAnswer('Error: Internal error.', 500)
  }
}
