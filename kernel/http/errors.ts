import { carriesMark } from './copyMark.ts'

/**
 * Typed API errors. Every failure a client can cause is one of these codes; the
 * server turns it into `status` + a plain `Error: ...` body (D6). Anything else that
 * escapes a handler is a bug or an outage and is answered 500/503 without detail.
 */
export const errorStatus = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  NOT_ACCEPTABLE: 406,
  REQUEST_TIMEOUT: 408,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  UNPROCESSABLE_ENTITY: 422,
  TOO_MANY_REQUESTS: 429,
  SERVICE_UNAVAILABLE: 503,
} as const

export type ErrorCode = keyof typeof errorStatus

/**
 * Why the kernel refused a call with 401 or 429, for the metrics' labels
 * (keygate_auth_refusals_total): named where the refusal is made, never read back from
 * its text.
 */
export type Refusal =
  | 'missing_credentials' | 'malformed_credentials' | 'unknown_key' | 'bad_date' | 'clock_window'
  | 'bad_signature' | 'day_code' | 'replay' | 'day_code_lockout' | 'rate_limit' | 'credits'

// Recognised by this mark, not by its class (copyMark.ts).
const apiErrorMark = Symbol.for('keygate.ApiError')

export class ApiError extends Error {
  readonly status: number
  readonly headers: Record<string, string> | undefined
  /** The kernel's own refusals name theirs (see Refusal); null for every other error. */
  refusal: Refusal | null = null
  readonly [apiErrorMark] = true

  constructor(readonly code: ErrorCode, message: string, headers?: Record<string, string>) {
    super(message.startsWith('Error: ') ? message : `Error: ${message}`)
    this.status = errorStatus[code]
    this.headers = headers
  }

  /** True for an ApiError made by any copy of this module. */
  static is(error: unknown): error is ApiError {
    return carriesMark(error, apiErrorMark)
  }
}

export const badRequest = (message: string) => new ApiError('BAD_REQUEST', message)
export const unauthorized = (message = 'Not authorised.') => new ApiError('UNAUTHORIZED', message)
export const forbidden = (message: string) => new ApiError('FORBIDDEN', message)
export const notFound = (message = 'Not found.') => new ApiError('NOT_FOUND', message)

/** An error of the kernel's own refusals, labelled with why (the metrics count by it). */
export function refused<E extends ApiError>(error: E, refusal: Refusal): E {
  error.refusal = refusal
  return error
}
