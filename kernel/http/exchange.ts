import type { IncomingMessage } from 'node:http'
import type { ValidateFunction } from 'ajv'
import type { AclEntry, Call, CallerKey, ResponseFormat, Route } from '../plugin.ts'
import type { Credentials } from '../auth/credentials.ts'
import type { SignedWith, AuthRecord } from '../auth/keyDirectory.ts'
import type { RateDecision } from '../limits/rateLimits.ts'
import type { ClaimTicket } from './idempotencyStore.ts'
import type { Refusal } from './errors.ts'
import type { AnswerBody } from './bodyPieces.ts'

/** A plugin route as mounted: its validators compiled once at start. */
export interface MountedRoute {
  id: number
  plugin: string
  route: Route
  /** Resolved `route.writes` (replay refusal, Idempotency-Key). */
  writes: boolean
  validateBody: ValidateFunction | null
  validateQuery: ValidateFunction | null
}

export interface Answer {
  status: number
  /** One buffer, or pieces sent as they are (bodyPieces.ts): `bodyBytes` gives one buffer of either. */
  body: AnswerBody
  contentType: string
  headers: [string, string][]
}

/**
 * One request on its way through the pipeline. Every field exists from the start,
 * so V8 keeps one shape for all exchanges; stages fill them in order.
 */
export class Exchange implements Call<unknown, Record<string, unknown>> {
  /** Path and query after the base path, as sent: what the signature covers (D4). */
  signedPath: string
  queryString: string
  rawBody: Buffer | undefined = undefined
  /**
   * Set by the server for a request sent with `Expect: 100-continue`: asks the client for
   * its body. The body stage calls it just before reading, so a call refused from its
   * headers never invites the upload.
   */
  continueBody: (() => void) | null = null
  credentials: Credentials | null = null
  record: AuthRecord | null = null
  /** Which of the key's secrets signed this call (set by the verify stage). */
  signedWith: SignedWith | null = null
  caller!: CallerKey
  acl: AclEntry | null = null
  requestId = 0
  format: ResponseFormat = 'json'
  rate: RateDecision | null = null
  body: unknown = undefined
  query: Record<string, unknown> = {}
  extraHeaders: [string, string][] = []
  cacheKey: string | null = null
  /** The response cache's invalidation count when `cacheKey` was made: an answer computed across one is not kept. */
  cacheEpoch = 0
  /** The Idempotency-Key claim this call holds: its answer is stored for the key's retries. */
  idempotencyClaim: ClaimTicket | null = null
  answer: Answer | null = null
  /** Why the kernel refused the call (401, 429), when it did: the metrics count by it. */
  refusal: Refusal | null = null
  /** It answered 503 after a write the database may still carry out (storage/uncertainWrites.ts). */
  writeUncertain = false
  /** The answer is the response cache's: its body is the cache's own buffer, shared by every call that got it. */
  fromCache = false
  /** The handler's answer before encoding (kept for a level-2 log of CSV/XML calls). */
  result: unknown = undefined
  readonly startedAt: number
  readonly startedTick: number

  constructor(
    readonly request: IncomingMessage,
    readonly mounted: MountedRoute,
    basePathLength: number,
    now: number,
  ) {
    const url = request.url!
    const queryAt = url.indexOf('?')
    this.signedPath = url.slice(basePathLength)
    this.queryString = queryAt === -1 ? '' : url.slice(queryAt + 1)
    this.startedAt = now
    this.startedTick = performance.now()
  }

  get headers() {
    return this.request.headers
  }

  setHeader(name: string, value: string): void {
    this.extraHeaders.push([name, value])
  }
}
