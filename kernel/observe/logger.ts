/**
 * The service's own log: pino JSON lines on stdout (start, stop, warnings, errors, and
 * the access line of each call as `log.access` says). Distinct from the call log
 * (api_log), which callers read through the API.
 */
import { pino, type Logger } from 'pino'

export type { Logger }

const censor = '[redacted]'

/**
 * What can never be printed, wherever it turns up in a logged object: credential
 * headers (the Api_Key too: an identifier, but it stays out of logs with the rest),
 * secrets, signatures, day codes, passwords, the master key, the database URL (its
 * password), the SQL text of a driver error (it may hold bound values), and the input
 * of an invalid-URL error (it may be a database URL).
 */
export const redactedPaths = [
  'headers.authorization', 'headers.cookie', 'headers["x-apikey"]', 'headers["x-apidate"]', 'headers["x-apihmac"]', 'headers["x-apitoday"]',
  '*.headers.authorization', '*.headers.cookie', '*.headers["x-apikey"]', '*.headers["x-apihmac"]', '*.headers["x-apitoday"]',
  'secret', 'Api_Secret', 'apiSecret', 'apiKey', 'Api_Key', 'apiHmac', 'apiToday', 'password', 'masterKey', 'databaseUrl', 'daySecret',
  '*.secret', '*.Api_Secret', '*.apiSecret', '*.apiKey', '*.Api_Key', '*.apiHmac', '*.apiToday', '*.password', '*.masterKey', '*.databaseUrl', '*.daySecret',
  'err.sql', '*.sql', 'err.input', 'err.cause.input',
]

export interface LoggerOptions {
  /** pino level; default `info`. */
  level?: string
  /** Where lines go; default stdout, written synchronously so a line is out before exit. */
  destination?: NodeJS.WritableStream | { write(line: string): void }
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const destination = options.destination ?? pino.destination({ dest: 1, sync: true })
  return pino({
    level: options.level ?? 'info',
    base: { service: 'keygate', pid: process.pid },
    redact: { paths: redactedPaths, censor },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  }, destination as pino.DestinationStream)
}

/** For tests and embedders that want no output. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' })
}

/**
 * What a report knows of the call that failed, when one did: its request id (the
 * `x-RequestID` the caller got; null before authentication), method and route, so the
 * error line can be found from the caller's id even with `log.access` at `none`.
 */
export interface ErrorContext {
  requestId: number | null
  method?: string
  route?: string
}

export type ErrorReport = (error: unknown, context?: ErrorContext) => void

/**
 * The kernel's default error report: a database outage is a warning, said at most once
 * per `outageEveryMs` with the count of those not repeated (every call fails the same
 * way while it lasts); anything else is an error line with its stack (and its call).
 */
export function errorReporter(logger: Logger, isOutage: (error: unknown) => boolean, outageEveryMs = 5000): ErrorReport {
  let lastOutageAt = -Infinity
  let unreported = 0
  return (error, context) => {
    if (!isOutage(error)) return logger.error({ ...context, err: error }, 'unexpected error')
    const now = performance.now()
    if (now - lastOutageAt < outageEveryMs) {
      unreported++
      return
    }
    logger.warn({ err: error, repeated: unreported }, 'database unavailable')
    lastOutageAt = now
    unreported = 0
  }
}
