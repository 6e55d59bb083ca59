import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import type { Config } from './config.ts'
import type { KernelServices, Plugin } from '../plugin.ts'
import { openDatabase, isStoreOutage, type Database } from '../storage/database.ts'
import { coreMigrations } from '../storage/coreMigrations.ts'
import { migrate } from '../storage/migrator.ts'
import { loadMasterKey, SecretBox } from '../auth/secrets.ts'
import { KeyAdministration } from '../auth/keyAdministration.ts'
import { bootstrap, loadDaySecret } from './bootstrap.ts'
import type { IssuedKey } from '../auth/keyIssuer.ts'
import { loadPlugins } from './pluginLoader.ts'
import { RouteTable } from '../http/router.ts'
import { KeyDirectory } from '../auth/keyDirectory.ts'
import { RateLimits, inMemoryLimiters, rateLimitHeaders } from '../limits/rateLimits.ts'
import { RequestIds } from '../callLog/requestId.ts'
import { ResponseCache } from '../http/responseCache.ts'
import { CallLog } from '../callLog/callLog.ts'
import { Exchange, type Answer } from '../http/exchange.ts'
import { runPipeline, type Stage } from '../http/pipeline.ts'
import { ApiError } from '../http/errors.ts'
import { readBodyStage } from '../http/stages/readBody.ts'
import { authenticateStage } from '../http/stages/authenticate.ts'
import { authorizeStage, secureTransport } from '../http/stages/authorize.ts'
import { rateLimitStage } from '../http/stages/rateLimit.ts'
import { parseInputStage } from '../http/stages/parseInput.ts'
import { cacheLookupStage } from '../http/stages/cache.ts'
import { handleStage } from '../http/stages/handle.ts'
import { callLogger } from '../http/stages/log.ts'
import type { ClusterLink, Invalidation } from './cluster.ts'
import { sql } from 'kysely'
import { createLogger, errorReporter, type Logger } from '../observe/logger.ts'
import { KernelMetrics } from '../observe/metrics.ts'
import { accessLogStage } from '../observe/accessLog.ts'
import { runAfter } from '../observe/afterStage.ts'
import { healthResponder } from '../http/health.ts'
import { clientAddress } from '../http/clientAddress.ts'
import { packageVersion } from './packageRoot.ts'

export interface KernelOptions {
  config: Config
  /** Plugins given directly, beside those enabled by name in config (tests, embedders). */
  plugins?: Plugin[]
  clock?: () => number
  /** Where unexpected errors go (default: stderr). */
  report?: (error: unknown) => void
  /** Set in a cluster worker: shared rate limits and cache invalidation (kernel/cluster.ts). */
  cluster?: ClusterLink
  /** The service log (pino JSON lines; default: stdout). */
  logger?: Logger
}

export interface Kernel {
  readonly config: Config
  readonly services: KernelServices
  readonly database: Database
  /** Seals and opens API secrets under the master key (the operator CLI, tests). */
  readonly secrets: SecretBox
  /** The root admin key when this start created it (first start), else null. */
  readonly createdRootKey: IssuedKey | null
  readonly daySecret: Buffer
  readonly logger: Logger
  /** The mounted routes, by plugin: what this instance answers. */
  routes(): { plugin: string; method: string; path: string; dayCode: boolean; hasBody: boolean }[]
  listen(): Promise<{ port: number; url: string }>
  close(): Promise<void>
}

const plainText = 'text/plain; charset=utf-8'

function errorAnswer(message: string, status: number, headers: [string, string][] = []): Answer {
  return { status, body: Buffer.from(message), contentType: plainText, headers }
}

/** Starts one kernel instance: database, migrations, first start, plugins, pipeline. Not yet listening. */
export async function createKernel(options: KernelOptions): Promise<Kernel> {
  const { config } = options
  const clock = options.clock ?? Date.now
  const logger = options.logger ?? createLogger()
  const metrics: KernelMetrics = new KernelMetrics({ logQueued: () => callLog.queued, logQueueMax: config.log.queueMax }, packageVersion)
  const report = metrics.observeReport(options.report ?? errorReporter(logger, isStoreOutage))
  const plugins = await loadPlugins(config.plugins, options.plugins)
  const database = openDatabase(config)
  const { db, dialect } = database
  try {
    await migrate(db, dialect, 'kernel', coreMigrations(dialect))
    for (const plugin of plugins) if (plugin.migrations) await migrate(db, dialect, plugin.name, plugin.migrations)
  } catch (error) {
    await database.close()
    throw error
  }
  const secrets = new SecretBox(loadMasterKey(config.masterKey, config.dataDir))
  const daySecret = await loadDaySecret(db, secrets)
  const createdRootKey = await bootstrap(db, secrets, plugins, { dataDir: config.dataDir, now: clock() })

  const keys = new KeyDirectory(db, secrets, clock, config.cache.maxEntries, config.cache.keyTtlSeconds)
  const rateLimits = new RateLimits(options.cluster?.limiters ?? inMemoryLimiters(clock))
  const requestIds = new RequestIds(config.nodeId, clock)
  const cache = new ResponseCache(config.cache.maxEntries, config.cache.responseBytes)
  const callLog = new CallLog(db, config.log, clock, report, config.nodeId, (rows) => database.insertMany('api_log', rows))
  requestIds.resumeAfter(await callLog.lastId())
  callLog.startPurging()
  callLog.flushObserver = (seconds) => metrics.observeFlush(seconds)

  const keyPartition = (keyId: number) => `key:${keyId}`
  // Applied here, and on every sibling worker in cluster mode.
  const invalidate = (invalidation: Invalidation) => {
    if (invalidation.kind === 'partition') return cache.invalidate(invalidation.partition)
    if (invalidation.kind === 'access') return keys.forgetAll()
    keys.forget(invalidation.keyId)
    cache.invalidate(keyPartition(invalidation.keyId))
  }
  options.cluster?.onInvalidation(invalidate)
  const invalidateEverywhere = (invalidation: Invalidation) => {
    invalidate(invalidation)
    options.cluster?.broadcast(invalidation)
  }

  const keyAdministration = new KeyAdministration(db, dialect, secrets, clock, {
    key: (keyId) => invalidateEverywhere({ kind: 'key', keyId }),
    access: () => invalidateEverywhere({ kind: 'access' }),
  })
  const services: KernelServices = {
    config,
    dialect,
    db: db as unknown as KernelServices['db'],
    clock,
    cache: {
      invalidate: (partition) => invalidateEverywhere({ kind: 'partition', partition }),
      keyPartition,
      remember: (partition, name, ttlSeconds, compute) => cache.remember(partition, name, ttlSeconds, compute),
    },
    keys: keyAdministration,
    callLog: {
      find: (requestId, keyId) => callLog.find(requestId, keyId),
      history: (keyId, query) => callLog.history(keyId, query),
    },
    rateLimits: { status: (caller) => rateLimits.status(caller, clock()) },
  }

  const routes = new RouteTable(config.basePath)
  for (const plugin of plugins) {
    for (const route of await plugin.setup(services)) routes.add(plugin.name, route)
  }

  const isSecure = secureTransport(new Set(config.trustProxy))
  const stages: Stage[] = [
    readBodyStage(config.bodyLimit),
    authenticateStage({ keys, rateLimits, requestIds, daySecret, clock }),
    // Before the ACL check, so a key probing paths it may not call spends its MaxHits too.
    rateLimitStage(rateLimits),
    authorizeStage(isSecure),
    parseInputStage(),
    ...(config.cache.responses ? [cacheLookupStage(cache)] : []),
    handleStage(cache),
  ]
  const logCall = callLogger(callLog, config, isSecure)
  // After-phase observers (kernel/observe); they join `stages` once the pipeline runs `after`.
  const observers = [accessLogStage(logger, config.log.access ?? 'errors', clientAddress(new Set(config.trustProxy))), metrics.stage()]
  const health = healthResponder({ ping: () => sql`select 1`.execute(db), logQueue: () => ({ queued: callLog.queued, max: config.log.queueMax }), closing: () => closing !== null })
  const basePathLength = config.basePath.length
  const notFound = errorAnswer('Error: Not found.', 404)

  function send(response: ServerResponse, answer: Answer, exchange: Exchange | null): void {
    const headers: string[] = ['Content-Type', answer.contentType, 'Content-Length', String(answer.body.length)]
    if (exchange !== null) {
      if (exchange.requestId !== 0) headers.push('x-RequestID', String(exchange.requestId))
      if (exchange.rate !== null) for (const [name, value] of rateLimitHeaders(exchange.rate)) headers.push(name, value)
    }
    for (const [name, value] of answer.headers) headers.push(name, value)
    response.writeHead(answer.status, headers)
    // As a latin1 string the bytes go out unchanged, and node:http sends them in one
    // write with the head instead of a writev of two chunks.
    response.end(answer.body.toString('latin1'), 'latin1')
  }

  function failure(error: unknown): Answer {
    if (error instanceof ApiError) {
      return errorAnswer(error.message, error.status, error.headers ? Object.entries(error.headers) : [])
    }
    if (isStoreOutage(error)) {
      report(error)
      return errorAnswer('Error: Service temporarily unavailable, try again shortly.', 503, [['Retry-After', '2']])
    }
    report(error)
    return errorAnswer('Error: Internal error.', 500)
  }

  // Calls still being handled: close() waits for them even when their client has gone,
  // so no handler runs on against a closed log queue or database.
  let inFlight = 0
  let allSettled: (() => void) | null = null
  const settled = () => {
    if (--inFlight === 0 && allSettled) allSettled()
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    if (health(request, response)) return
    const url = request.url ?? '/'
    const queryAt = url.indexOf('?')
    const mounted = routes.find(request.method ?? 'GET', queryAt === -1 ? url : url.slice(0, queryAt))
    if (mounted === null) {
      request.resume()
      return send(response, notFound, null)
    }
    const exchange = new Exchange(request, response, mounted, basePathLength, clock())
    inFlight++
    try {
      let answer: Answer
      try {
        await runPipeline(stages, exchange)
        answer = exchange.answer!
      } catch (error) {
        answer = failure(error)
        if (answer.status === 413) response.setHeader('Connection', 'close')
      }
      if (exchange.requestId !== 0) {
        // A full log queue makes the call wait (backpressure) instead of losing its record.
        const room = callLog.admit()
        if (room) await room
        logCall(exchange, answer.status, answer.body, exchange.format)
      }
      exchange.answer = answer
      runAfter(observers, exchange, report)
      send(response, answer, exchange)
    } finally {
      settled()
    }
  }

  const serverOptions = {
    maxHeaderSize: config.timeouts.maxHeaderSize,
    requestTimeout: config.timeouts.requestMs,
    headersTimeout: config.timeouts.headersMs,
    keepAliveTimeout: config.timeouts.keepAliveMs,
    // Node checks the two timeouts above on this interval; the default (30 s) is too slow.
    connectionsCheckingInterval: 1000,
  }
  const listener = (request: IncomingMessage, response: ServerResponse) => {
    handle(request, response).catch((error) => {
      report(error)
      if (!response.headersSent) send(response, errorAnswer('Error: Internal error.', 500), null)
    })
  }
  const server: Server = config.tls
    ? createHttpsServer({ ...serverOptions, cert: readFileSync(config.tls.certFile), key: readFileSync(config.tls.keyFile) }, listener)
    : createHttpServer(serverOptions, listener)
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy()
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
    const message = status === 431 ? 'Error: Request headers are too large.' : status === 408 ? 'Error: Request timed out.' : 'Error: Malformed HTTP request.'
    socket.end(`HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\r\nContent-Type: ${plainText}\r\nContent-Length: ${Buffer.byteLength(message)}\r\nConnection: close\r\n\r\n${message}`)
  })

  let closing: Promise<void> | null = null
  return {
    config,
    services,
    database,
    secrets,
    createdRootKey,
    daySecret,
    logger,
    routes: () => routes.routes().map(({ plugin, route }) => ({ plugin, method: route.method, path: route.path, dayCode: route.dayCode === true, hasBody: route.body !== undefined })),
    async listen() {
      await metrics.listen(config.metrics)
      return new Promise((resolve, reject) => {
        server.once('error', reject)
        server.listen(config.port, config.host, () => {
          server.off('error', reject)
          const { port } = server.address() as AddressInfo
          const host = config.host.includes(':') ? `[${config.host}]` : config.host
          resolve({ port, url: `${config.tls ? 'https' : 'http'}://${host}:${port}${config.basePath}` })
        })
      })
    },
    close() {
      closing ??= (async () => {
        // Stop accepting; idle keep-alive sockets close now, busy ones after their answer.
        await new Promise<void>((resolve) => {
          if (!server.listening) return resolve()
          server.close(() => resolve())
          server.closeIdleConnections()
          // In-flight calls get their time; a client that never lets go does not hold us up.
          setTimeout(() => server.closeAllConnections(), config.timeouts.requestMs).unref()
        })
        if (inFlight > 0) {
          await new Promise<void>((resolve) => {
            allSettled = resolve
            setTimeout(resolve, config.timeouts.requestMs).unref()
          })
        }
        await callLog.close()
        await metrics.close()
        for (const plugin of plugins) await plugin.close?.()
        await database.close()
      })()
      return closing
    },
  }
}
