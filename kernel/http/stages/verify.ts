import type { Stage } from '../pipeline.ts'
import type { Exchange } from '../exchange.ts'
import type { RateLimits } from '../../limits/rateLimits.ts'
import type { RequestIds } from '../../callLog/requestId.ts'
import type { CallerKey } from '../../plugin.ts'
import type { SignedWith } from '../../auth/keyDirectory.ts'
import type { SignatureMemory } from '../../auth/signatureMemory.ts'
import { sameSignature, stringToSign, verifySignature } from '../../auth/signature.ts'
import { verifyDayCode } from '../../auth/dayCode.ts'
import { ApiError, refused, unauthorized } from '../errors.ts'
import type { AclLookup } from './authorize.ts'

export interface VerifyDependencies {
  lookupAcl: AclLookup
  rateLimits: RateLimits
  requestIds: RequestIds
  /** The last signature of each busy key, so a reused one needs no second HMAC. */
  signatures: SignatureMemory
  daySecret: Buffer
  clock: () => number
}

/**
 * D4 and D5, once the body is in hand: the signature over method, path, date and body,
 * with the hash method of the key or its ACL entry, then the day code where the route or
 * the key needs one. Only then is the caller established: the request id is assigned,
 * so every later answer (403, 429, 400, 200) carries one and is logged under the key.
 */
/** The 429 of a key blocked for wrong day codes. */
const dayCodeLockoutText = 'Error: Too many wrong day codes; try again later.'

export function verifyStage(deps: VerifyDependencies): Stage {
  const { lookupAcl, rateLimits, requestIds, signatures, daySecret, clock } = deps

  const tooManyGuesses = (blockedMs: number) =>
    refused(new ApiError('TOO_MANY_REQUESTS', dayCodeLockoutText, { 'Retry-After': String(Math.ceil(blockedMs / 1000)) }), 'day_code_lockout')

  async function checkDayCode(caller: CallerKey, code: string | undefined): Promise<void> {
    // A right code (however many calls send it at once) passes unless the key is blocked.
    if (code === undefined || verifyDayCode(daySecret, code, clock())) {
      const blockedMs = await rateLimits.dayCodeBlocked(caller)
      if (blockedMs > 0) throw tooManyGuesses(blockedMs)
      if (code === undefined) throw refused(unauthorized('This call needs the day code (x-apitoday).'), 'day_code')
      return
    }
    // A wrong one is counted in one atomic step of the store, and the answer depends on
    // that count: past the tenth of the minute it is 429 like any call of a blocked key,
    // so however many are sent at once, to however many processes, ten are judged.
    const blockedMs = await rateLimits.dayCodeFailed(caller)
    if (blockedMs > 0) throw tooManyGuesses(blockedMs)
    // A wrong guess also spends the key's own MaxHits (D5).
    await rateLimits.consume(caller)
    throw refused(unauthorized('The day code (x-apitoday) is wrong or expired.'), 'day_code')
  }

  function established(exchange: Exchange): void {
    exchange.requestId = requestIds.next()
  }

  return {
    name: 'verify',
    run(exchange) {
      const caller = exchange.caller
      // Nothing to verify without credentials: the ACL stage admits such a call to public paths only.
      if (caller.anonymous) return
      const record = exchange.record!
      const credentials = exchange.credentials!
      const acl = lookupAcl(exchange)
      const method = caller.requireHash ?? acl?.requireHash ?? 0
      const toSign = stringToSign(exchange.request.method!, exchange.signedPath, credentials.apiDate!, exchange.rawBody)
      const last = signatures.last(record)
      const previous = record.previous
      // A client may reuse a signature within its second; the same input needs no second HMAC.
      if (last === undefined || last.toSign !== toSign || last.method !== method || !sameSignature(last.signature, credentials.apiHmac!) ||
        (last.signedWith === 'previous' && (previous === null || clock() >= previous.ends))) {
        let signedWith: SignedWith = 'current'
        if (!verifySignature(record.secret, toSign, credentials.apiHmac!, method)) {
          // During a rotation's overlap the secret before it still signs (issue 16 item 1).
          if (previous === null || clock() >= previous.ends || !verifySignature(previous.secret, toSign, credentials.apiHmac!, method)) {
            throw refused(unauthorized('Signature (x-apihmac) does not match.'), 'bad_signature')
          }
          signedWith = 'previous'
        }
        signatures.remember(record, { toSign, signature: credentials.apiHmac!, method, signedWith })
        exchange.signedWith = signedWith
      } else {
        exchange.signedWith = last.signedWith
      }
      if (exchange.mounted.route.dayCode || caller.dayPass === 1) {
        return checkDayCode(caller, credentials.apiToday).then(() => established(exchange))
      }
      established(exchange)
    },
  }
}
