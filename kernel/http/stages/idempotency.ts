import { createHash } from 'node:crypto'
import type { Stage } from '../pipeline.ts'
import type { Exchange } from '../exchange.ts'
import type { IdempotencyStore } from '../idempotencyStore.ts'
import { ApiError, badRequest } from '../errors.ts'
import { errorAnswer } from '../failure.ts'

const idempotencyKeyPattern = /^[\x21-\x7e]{1,255}$/

/**
 * What retries get after the first call answered 503 while the database may still have
 * carried out its write (a COMMIT without an answer): whether it did cannot be known here,
 * so the key is spent, as a payment API keeps a failed first attempt's outcome.
 */
const mayHaveRun = errorAnswer('Error: The first request with this Idempotency-Key may have been carried out: the database stopped answering while it was being written. Check its outcome before sending it again under a new Idempotency-Key.', 409)

/**
 * What must be the same for a retry to get the first answer: route, query, body and the
 * answer's format. The stored answer is the bytes sent, so a retry asking for CSV must not
 * get the first call's JSON. JSON adds nothing to the hash: a JSON claim stored by an
 * earlier version still matches its retry.
 */
function requestHash(exchange: Exchange): string {
  const hash = createHash('sha256').update(`${exchange.request.method} ${exchange.mounted.route.path}?${exchange.queryString}\n`)
  if (exchange.rawBody !== undefined) hash.update(exchange.rawBody)
  if (exchange.format !== 'json') hash.update(`\nformat=${exchange.format}`)
  return hash.digest('hex')
}

/**
 * `Idempotency-Key` on writes (issue 12), as payment APIs do: the same key, with the
 * same request, within 24 hours, answers the first call's stored answer without doing
 * the work again (`Idempotent-Replayed: true`); another request with the same key is
 * 422; a retry while the first is still running is 409. Only a successful (2xx) answer
 * is stored: a refused call changed nothing, whether the schema or the handler refused
 * it (a 400 date, a 404 id), so its claim is freed and a corrected retry under the same
 * key runs; so does a 5xx's. A refused body is refused before the claim.
 */
export function idempotencyStage(store: IdempotencyStore): Stage {
  return {
    name: 'idempotency',
    run(exchange) {
      if (!exchange.mounted.writes || exchange.caller.anonymous) return
      const header = exchange.request.headers['idempotency-key']
      if (header === undefined) return
      if (typeof header !== 'string' || !idempotencyKeyPattern.test(header)) {
        throw badRequest('Idempotency-Key must be 1 to 255 visible ASCII characters.')
      }
      return store.claim(exchange.caller.id, header, requestHash(exchange)).then((claim) => {
        if (claim.kind === 'stored') {
          exchange.answer = { ...claim.answer, headers: claim.answer.headers.concat([['Idempotent-Replayed', 'true']]) }
        } else if (claim.kind === 'running') {
          throw new ApiError('CONFLICT', 'A request with this Idempotency-Key is still being processed; try again shortly.')
        } else if (claim.kind === 'mismatch') {
          throw new ApiError('UNPROCESSABLE_ENTITY', 'This Idempotency-Key was already used with another request.')
        } else {
          exchange.idempotencyClaim = claim.ticket
        }
      })
    },
    after(exchange) {
      const ticket = exchange.idempotencyClaim
      if (ticket === null) return
      const answer = exchange.answer!
      // Its 503 stands for this call; a retry must not do the work a second time beside a write that may be there.
      if (exchange.writeUncertain) return store.settle(ticket, mayHaveRun)
      // The call's own answer stands even if storing it fails; the store keeps trying.
      const succeeded = answer.status >= 200 && answer.status < 300
      return store.settle(ticket, succeeded ? { ...answer, headers: answer.headers.slice() } : null)
    },
  }
}
