import type { Stage } from '../pipeline.ts'
import type { Exchange } from '../exchange.ts'
import type { AuthRecord, KeyDirectory } from '../../auth/keyDirectory.ts'
import type { RateLimits } from '../../limits/rateLimits.ts'
import type { RequestIds } from '../../callLog/requestId.ts'
import type { CallerKey } from '../../plugin.ts'
import { readCredentials } from '../../auth/credentials.ts'
import { dateWithinWindow, parseApiDate } from '../../auth/apiDate.ts'
import { sameSignature, stringToSign, verifySignature } from '../../auth/signature.ts'
import { verifyDayCode } from '../../auth/dayCode.ts'
import { effectiveAclEntry } from '../../auth/effectiveAcl.ts'
import { ApiError, unauthorized } from '../errors.ts'

export interface AuthenticateDependencies {
  keys: KeyDirectory
  rateLimits: RateLimits
  requestIds: RequestIds
  daySecret: Buffer
  clock: () => number
}

/** A caller with no key, for Is_Public paths: a tenant that owns nothing and is never logged as a key. */
export const anonymousCaller: CallerKey = Object.freeze({
  id: 0, apiKey: '', displayName: 'anonymous', parent: -1, custno: -1, startDate: null, endDate: null,
  dayPass: 0, requireHttps: 0, allowHours: null, responseFormat: 'json', logLevel: 0, logRaw: 0,
  maxHits: null, rateWindows: [], requireHash: null, createdBy: null, groupIds: [], acl: [], anonymous: true,
}) as CallerKey

// One message for unknown, inactive and not-yet-active keys: no key's existence leaks.
const unknownKey = 'Unknown or inactive API key.'

/**
 * D2-D5: credentials, key, validity dates, x-apidate window, signature, day code.
 * Every failure is 401. The request id is assigned once a caller is established, so
 * every later answer (403, 429, 400, 200) carries one and is logged.
 */
export function authenticateStage(deps: AuthenticateDependencies): Stage {
  const { keys, rateLimits, requestIds, daySecret, clock } = deps

  async function checkDayCode(caller: CallerKey, code: string | undefined): Promise<void> {
    const blockedMs = await rateLimits.dayCodeBlocked(caller)
    if (blockedMs > 0) {
      throw new ApiError('TOO_MANY_REQUESTS', 'Error: Too many wrong day codes; try again later.', { 'Retry-After': String(Math.ceil(blockedMs / 1000)) })
    }
    if (code === undefined) throw unauthorized('This call needs the day code (x-apitoday).')
    if (!verifyDayCode(daySecret, code, clock())) {
      await rateLimits.dayCodeFailed(caller)
      // A wrong guess also spends the key's own MaxHits (D5).
      await rateLimits.consume(caller)
      throw unauthorized('The day code (x-apitoday) is wrong or expired.')
    }
  }

  /** A caller is established: the request id is assigned (after the day code, where one is needed). */
  function admit(exchange: Exchange, record: AuthRecord | false): void | Promise<void> {
    verify(exchange, record)
    const caller = exchange.caller
    if (exchange.mounted.route.dayCode || caller.dayPass === 1) {
      return checkDayCode(caller, exchange.credentials!.apiToday).then(() => {
        exchange.requestId = requestIds.next()
      })
    }
    exchange.requestId = requestIds.next()
  }

  function verify(exchange: Exchange, record: AuthRecord | false): void {
    if (!record) throw unauthorized(unknownKey)
    const caller = record.caller
    const now = clock()
    if ((caller.startDate !== null && now < caller.startDate) || (caller.endDate !== null && now >= caller.endDate)) {
      throw unauthorized(unknownKey)
    }
    const credentials = exchange.credentials!
    if (credentials.apiDate === undefined) throw unauthorized('Missing credential x-apidate.')
    if (credentials.apiHmac === undefined) throw unauthorized('Missing credential x-apihmac.')
    const callerTime = parseApiDate(credentials.apiDate)
    if (callerTime === null) throw unauthorized('x-apidate must be an HTTP-date (Sun, 22 Nov 2026 08:49:37 GMT) or RFC 3339 UTC.')
    if (!dateWithinWindow(callerTime, now, caller.allowHours)) throw unauthorized('x-apidate is outside the allowed clock window.')
    const acl = keys.aclFor(record, exchange.mounted.route.path)
    const method = caller.requireHash ?? acl?.requireHash ?? 0
    const toSign = stringToSign(exchange.request.method!, exchange.signedPath, credentials.apiDate, exchange.rawBody)
    const last = record.lastVerified
    if (last === null || last.toSign !== toSign || last.method !== method || !sameSignature(last.signature, credentials.apiHmac)) {
      if (!verifySignature(record.secret, toSign, credentials.apiHmac, method)) throw unauthorized('Signature (x-apihmac) does not match.')
      record.lastVerified = { toSign, signature: credentials.apiHmac, method }
    }
    exchange.record = record
    exchange.caller = caller
    exchange.acl = acl
  }

  return {
    name: 'authenticate',
    run(exchange) {
      const credentials = readCredentials(exchange.request)
      exchange.credentials = credentials
      if (credentials.apiKey === undefined) {
        if (credentials.apiDate !== undefined || credentials.apiHmac !== undefined || credentials.apiToday !== undefined) {
          throw unauthorized('Missing credential x-apikey.')
        }
        return keys.publicEntries().then((entries) => {
          const entry = effectiveAclEntry(entries, exchange.mounted.route.path)
          if (!entry || exchange.mounted.route.dayCode) throw unauthorized('Missing credentials: x-apikey, x-apidate and x-apihmac are required.')
          exchange.caller = anonymousCaller
          exchange.acl = entry
          exchange.requestId = requestIds.next()
        })
      }
      // The common case stays synchronous: a cached key, no day code.
      const record = keys.cached(credentials.apiKey)
      if (record === undefined) return keys.load(credentials.apiKey).then((loaded) => admit(exchange, loaded))
      return admit(exchange, record)
    },
  }
}
