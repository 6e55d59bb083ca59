import type { Stage } from '../pipeline.ts'
import type { Exchange } from '../exchange.ts'
import type { AuthRecord, KeyDirectory } from '../../auth/keyDirectory.ts'
import type { CallerKey } from '../../plugin.ts'
import { readCredentials } from '../../auth/credentials.ts'
import { plausibleApiKey } from '../../auth/keyChecksum.ts'
import { dateWithinWindow, parseApiDate } from '../../auth/apiDate.ts'
import { refused, unauthorized } from '../errors.ts'

/** A caller with no key, for Is_Public paths: a tenant that owns nothing and is never logged as a key. */
export const anonymousCaller: CallerKey = Object.freeze({
  id: 0, apiKey: '', displayName: 'anonymous', parent: -1, custno: -1, startDate: null, endDate: null,
  dayPass: 0, requireHttps: 0, allowHours: null, responseFormat: 'json', logLevel: 0, logRaw: 0,
  maxHits: null, rateWindows: [], requireHash: null, createdBy: null, groupIds: [], acl: [], anonymous: true,
  metered: false, tenantQuotas: [],
}) as CallerKey

// One message for unknown, inactive and not-yet-active keys: no key's state but "active"
// shows. A holder of an active key's Api_Key alone does see the next check's text
// (date, signature): SECURITY.md 2a says why that is kept.
const unknownKey = 'Unknown or inactive API key.'

/**
 * D2, D3 and the key: everything about the caller that can be checked before the body
 * is read (the credentials, a known and active key, a date inside its window), so a
 * made-up key or a stale date is refused without reading a byte of the body. The
 * signature, which covers the body, is checked by the verify stage. Every failure is 401.
 * No credentials at all: an anonymous caller, whom the ACL stage admits to Is_Public paths only.
 */
export function authenticateStage(keys: KeyDirectory, clock: () => number): Stage {
  // Clients reuse one x-apidate for every call within its second: the last one parsed
  // is kept (text and time), so the date is parsed about once a second, not per call.
  let lastDateText = ''
  let lastDateTime: number | null = null
  const parsedDate = (text: string): number | null => {
    if (text !== lastDateText) {
      lastDateTime = parseApiDate(text)
      lastDateText = text
    }
    return lastDateTime
  }

  function identify(exchange: Exchange, record: AuthRecord | false): void {
    if (!record) throw refused(unauthorized(unknownKey), 'unknown_key')
    const caller = record.caller
    const now = clock()
    if ((caller.startDate !== null && now < caller.startDate) || (caller.endDate !== null && now >= caller.endDate)) {
      throw refused(unauthorized(unknownKey), 'unknown_key')
    }
    const credentials = exchange.credentials!
    if (credentials.apiDate === undefined) throw refused(unauthorized('Missing credential x-apidate.'), 'missing_credentials')
    if (credentials.apiHmac === undefined) throw refused(unauthorized('Missing credential x-apihmac.'), 'missing_credentials')
    const callerTime = parsedDate(credentials.apiDate)
    if (callerTime === null) {
      // Node joins two x-apidate lines with ", ", which an HTTP-date holds too: only a
      // date that does not parse is looked at again (no cost for the calls that pass).
      if (dateLines(exchange.request.rawHeaders) > 1) throw refused(unauthorized('Credential x-apidate was given more than once.'), 'malformed_credentials')
      throw refused(unauthorized('x-apidate must be an HTTP-date (Sun, 22 Nov 2026 08:49:37 GMT) or RFC 3339 UTC.'), 'bad_date')
    }
    if (!dateWithinWindow(callerTime, now, caller.allowHours)) throw refused(unauthorized('x-apidate is outside the allowed clock window.'), 'clock_window')
    exchange.record = record
    exchange.caller = caller
  }

  return {
    name: 'authenticate',
    run(exchange) {
      const credentials = readCredentials(exchange.request)
      exchange.credentials = credentials
      if (credentials.apiKey === undefined) {
        if (credentials.apiDate !== undefined || credentials.apiHmac !== undefined || credentials.apiToday !== undefined) {
          throw refused(unauthorized('Missing credential x-apikey.'), 'missing_credentials')
        }
        exchange.caller = anonymousCaller
        return
      }
      // The common case stays synchronous: a cached key (only a plausible key is ever
      // loaded, so a cached one needs no second checksum).
      const record = keys.cached(credentials.apiKey)
      if (record === undefined) {
        // A typo in a checksummed key costs no cache entry and no query (keyChecksum.ts).
        if (!plausibleApiKey(credentials.apiKey)) throw refused(unauthorized(unknownKey), 'unknown_key')
        return keys.load(credentials.apiKey).then((loaded) => identify(exchange, loaded))
      }
      identify(exchange, record)
    },
  }
}

/** How many plain x-apidate header lines the request has. */
function dateLines(rawHeaders: readonly string[]): number {
  let count = 0
  for (let index = 0; index < rawHeaders.length; index += 2) if (rawHeaders[index].toLowerCase() === 'x-apidate') count++
  return count
}
