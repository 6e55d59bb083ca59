import type { IncomingMessage } from 'node:http'
import type { Config } from '../boot/config.ts'
import type { KeyDirectory } from '../auth/keyDirectory.ts'
import type { RateLimits } from '../limits/rateLimits.ts'
import type { CreditLedger } from '../limits/credits.ts'
import type { RequestIds } from '../callLog/requestId.ts'
import type { CallLog } from '../callLog/callLog.ts'
import type { ResponseCache } from './responseCache.ts'
import type { ReplayGuard } from '../auth/replayGuard.ts'
import type { IdempotencyStore } from './idempotencyStore.ts'
import { createPipeline, type Pipeline, type Stage } from './pipeline.ts'
import { errorAnswer, failureAnswer } from './failure.ts'
import type { MountedRoute } from './exchange.ts'
import type { ProxyTrust } from './proxyTrust.ts'
import type { ErrorReport } from '../observe/logger.ts'
import { closeUnreadStage, readBodyStage } from './stages/readBody.ts'
import { authenticateStage } from './stages/authenticate.ts'
import { verifyStage } from './stages/verify.ts'
import { aclLookup, authorizeStage } from './stages/authorize.ts'
import { rateLimitStage } from './stages/rateLimit.ts'
import { creditsStage } from './stages/credits.ts'
import { parseInputStage } from './stages/parseInput.ts'
import { cacheStage } from './stages/cache.ts'
import { handleStage } from './stages/handle.ts'
import { logRoomStage, logStage } from './stages/log.ts'
import { replayStage } from './stages/replay.ts'
import { idempotencyStage } from './stages/idempotency.ts'
import { publishChangesStage } from './stages/publishChanges.ts'
import type { SignatureMemory } from '../auth/signatureMemory.ts'

export interface PipelineParts {
  config: Config
  keys: KeyDirectory
  rateLimits: RateLimits
  /** Issue 16: keys with Credits spend them per call. */
  credits: CreditLedger
  requestIds: RequestIds
  callLog: CallLog
  cache: ResponseCache
  replayGuard: ReplayGuard
  signatures: SignatureMemory
  idempotency: IdempotencyStore
  daySecret: Buffer
  clock: () => number
  report: ErrorReport
  /** The client's address and TLS as the trusted proxies tell them. */
  proxies: ProxyTrust
  /** Stages with only an after phase that watch every call (metrics, access lines); their failures are reported, never the call's. */
  observers?: Stage[]
  /** With Redis or cluster workers: the cache invalidations other processes have yet to apply (undefined when none). */
  publishing?: () => Promise<void> | undefined
}

export interface Pipelines {
  /** The pipeline of a call to a route: chosen by whether the request announces a body. */
  pipelineFor(request: IncomingMessage): Pipeline
  /** A call no route matches (or whose plugin is disabled): the observers see its 404 too. */
  unrouted: Pipeline
}

/** What a call no route matches is charged to in the access line and metrics: never its raw URL, as for any call (accessLog.ts). */
export const noRoute: MountedRoute = {
  id: -1,
  plugin: '',
  route: { method: 'GET', path: '(no route)', xml: { root: 'Error' }, handler: () => undefined },
  writes: false,
  validateBody: null,
  validateQuery: null,
}

const notFoundStage: Stage = {
  name: 'not-found',
  run(exchange) {
    exchange.request.resume()
    exchange.answer = errorAnswer('Error: Not found.', 404)
  },
}

/**
 * The stages of a call, built once at start, in the two orders a call can take; the
 * answer to "which one" is whether the request announces a body.
 */
export function buildPipelines(parts: PipelineParts): Pipelines {
  const { config, keys, rateLimits, credits, requestIds, callLog, cache, replayGuard, signatures, idempotency, daySecret, clock, report, proxies } = parts
  const observers = (parts.observers ?? []).map((observer) => watching(observer, report))
  const lookupAcl = aclLookup(keys)
  const stage = {
    log: logStage(callLog, config, proxies),
    logRoom: logRoomStage(callLog),
    closeUnread: closeUnreadStage(),
    authenticate: authenticateStage(keys, clock),
    acl: authorizeStage(keys, lookupAcl, requestIds, proxies.isSecure),
    body: readBodyStage(config.bodyLimit),
    verify: verifyStage({ lookupAcl, rateLimits, requestIds, signatures, daySecret, clock }),
    rateLimit: rateLimitStage(rateLimits),
    // Writes only, once the signature is verified and before credits: a replayed write
    // spends none (issue 16: only authenticated calls spend), and it is refused before
    // the idempotency stage, so a captured request never gets a stored answer (a new
    // key's secret); a real retry is signed again.
    replay: replayStage(replayGuard),
    // After the rate limit: a call the limit refuses spends no credit.
    credits: creditsStage(credits, clock),
    input: parseInputStage(),
    idempotency: idempotencyStage(idempotency),
    cache: config.cache.responses ? [cacheStage(cache)] : [],
    publish: parts.publishing ? [publishChangesStage(parts.publishing)] : [],
    handler: handleStage(),
  }
  const failure = failureAnswer(report)
  const pipeline = (stages: Stage[]) => createPipeline(stages, failure)
  // A call without a body is verified at once; the rate limit comes before the ACL
  // decision, so a key probing paths it may not call spends its MaxHits too.
  const withoutBody = pipeline([
    ...observers, stage.log, stage.logRoom, stage.authenticate, stage.verify, stage.rateLimit, stage.replay, stage.credits, stage.acl, stage.input, stage.idempotency, ...stage.cache, ...stage.publish, stage.handler,
  ])
  // A call with a body is refused before a byte of it is read when its key, date or ACL
  // already says no; the body is read (up to the route's limit) only for a caller the
  // ACL admits, and the signature over it is verified after.
  const withBody = pipeline([
    ...observers, stage.log, stage.closeUnread, stage.logRoom, stage.authenticate, stage.acl, stage.body, stage.verify, stage.rateLimit, stage.replay, stage.credits, stage.input, stage.idempotency, ...stage.cache, ...stage.publish, stage.handler,
  ])
  return {
    pipelineFor: (request) => (announcesBody(request) ? withBody : withoutBody),
    unrouted: pipeline([...observers, notFoundStage]),
  }
}

/** An observer's after phase, run without ever changing the call's answer. */
function watching(observer: Stage, report: ErrorReport): Stage {
  const after = observer.after?.bind(observer)
  return {
    name: observer.name,
    after: after && ((exchange) => {
      try {
        const pending = after(exchange)
        if (pending) return pending.catch(report)
      } catch (error) {
        report(error)
      }
    }),
  }
}

export function announcesBody(request: IncomingMessage): boolean {
  const length = request.headers['content-length']
  return length === undefined ? request.headers['transfer-encoding'] !== undefined : length !== '0'
}
