import { rmSync } from 'node:fs'
import { ConfigError, type Config } from './config.ts'
import type { KernelServices, Plugin, SealedColumn } from '../plugin.ts'
import { isStoreOutage, openDatabase, type Database } from '../storage/database.ts'
import { coreMigrations } from '../storage/coreMigrations.ts'
import { migrate } from '../storage/migrator.ts'
import { oneStartAtATime } from '../storage/namedLock.ts'
import { masterSecretBox, type SecretBox } from '../auth/secrets.ts'
import { makeGeneratedKeyFile, masterKeySource } from '../auth/masterKey.ts'
import { KeyAdministration } from '../auth/keyAdministration.ts'
import { bootstrap, loadDaySecret, MasterKeyMismatch, type RootKey } from './bootstrap.ts'
import { PluginError } from './pluginError.ts'
import { pluginSealedColumns, recordSealedColumns } from './sealedColumnRecord.ts'
import { enabledPlugins, loadPlugins } from './pluginLoader.ts'
import { mergedHistory, routesMissingFromHistory } from './pluginHistory.ts'
import { routeCatalog } from '../http/routeCatalog.ts'
import { RouteTable } from '../http/router.ts'
import { KeyDirectory } from '../auth/keyDirectory.ts'
import { AuditRetention, defaultAuditRetentionDays } from '../audit/auditRetention.ts'
import { RateLimits, inMemoryLimiters, rateCountsMax } from '../limits/rateLimits.ts'
import { CreditLedger } from '../limits/credits.ts'
import { RequestIds } from '../callLog/requestId.ts'
import { ResponseCache } from '../http/responseCache.ts'
import { CallLog } from '../callLog/callLog.ts'
import { withSharedAnswers } from '../callLog/sharedAnswers.ts'
import { createServer } from '../http/server.ts'
import type { ClusterLink } from './cluster.ts'
import { changesInFlight, invalidation, keyPartition } from './invalidation.ts'
import { buildPipelines } from '../http/pipelines.ts'
import { AccessStamp, accessStampEveryMs } from '../cluster/accessStamp.ts'
import { PartitionChanges, partitionChangesEveryMs } from '../cluster/partitionChanges.ts'
import { recordChange } from '../audit/auditTrail.ts'
import { ReplayGuard } from '../auth/replayGuard.ts'
import { DatabaseSignatures } from '../auth/usedSignatures.ts'
import { SignatureMemory, signatureMemoryMax } from '../auth/signatureMemory.ts'
import { IdempotencyStore } from '../http/idempotencyStore.ts'
import { NodeRegistry, followNodeId } from '../cluster/nodeRegistry.ts'
import { Tenants } from '../tenants/tenants.ts'
import { sql } from 'kysely'
import { createLogger, errorReporter, type ErrorReport, type Logger } from '../observe/logger.ts'
import { KernelMetrics } from '../observe/metrics.ts'
import { accessLogStage } from '../observe/accessLog.ts'
import { healthResponder } from '../http/health.ts'
import { basePathUnderMount, hiddenRoute, staticFilesResponder } from '../http/staticFiles.ts'
import { proxyTrust } from '../http/proxyTrust.ts'
import { packageVersion } from './packageRoot.ts'
import { RedisLink } from '../cluster/redisLink.ts'
import { RedisInvalidation } from '../cluster/redisInvalidation.ts'
import { redisLimiters } from '../limits/redisLimiters.ts'
import { EventBus } from '../events/events.ts'
import { UsageEvents } from '../events/usageEvents.ts'
import { ExpiryScan } from '../events/expiryScan.ts'

export interface KernelOptions {
  config: Config
  /** Plugins given directly, beside those enabled by name in config (tests, embedders). */
  plugins?: Plugin[]
  clock?: () => number
  /** Where unexpected errors go (default: stderr). */
  report?: ErrorReport
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
  /** Sealed columns of the enabled plugins' tables, by plugin (`admin master-key rotate` re-seals them). */
  readonly sealedColumns: readonly (SealedColumn & { plugin: string })[]
  /** Whether Redis answers now; null without Redis (the operator CLI says how a change reaches the service). */
  redisReachable(): boolean | null
  /** The root admin key and its file when this start created it (first start), else null. */
  readonly createdRootKey: RootKey | null
  readonly daySecret: Buffer
  readonly logger: Logger
  /** How many entries the per-key memories hold now (issue 19: each is bounded; tests check it). */
  cacheSizes(): { keys: number; accessProfiles: number; responses: number; responseBodies: number; rateCounts: number; signatures: number; partitionMarks: number }
  /** The mounted routes, by plugin: what this instance answers. */
  routes(): { plugin: string; method: string; path: string; dayCode: boolean; hasBody: boolean }[]
  listen(): Promise<{ port: number; url: string }>
  close(): Promise<void>
}

/** Waits for `work`, but no longer than `ms` (it goes on unwatched). */
function atMost(ms: number, work: Promise<unknown>): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined
  const waited = new Promise((resolve) => (timer = setTimeout(resolve, ms)))
  return Promise.race([work, waited]).finally(() => clearTimeout(timer))
}

/** Starts one kernel instance: database, migrations, first start, plugins, pipeline. Not yet listening. */
export async function createKernel(options: KernelOptions): Promise<Kernel> {
  const { config } = options
  const clock = options.clock ?? Date.now
  const logger = options.logger ?? createLogger()
  const metrics: KernelMetrics = new KernelMetrics({ logQueued: () => callLog.queued, logQueueMax: config.log.queueMax }, packageVersion)
  const report = metrics.observeReport(options.report ?? errorReporter(logger, isStoreOutage))
  const plugins = await loadPlugins(enabledPlugins(config), options.plugins)
  const mounts = plugins.flatMap((plugin) => plugin.staticFiles?.(config) ?? [])
  // Refused before the database is made: a base path under a mount would hide every route.
  const buried = basePathUnderMount(config.basePath, mounts)
  if (buried) throw new ConfigError(buried)
  const database = openDatabase(config, { checkpointInBackground: true })
  const { db, dialect } = database
  // A start that fails here (a migration, a wrong master key, a taken node id) closes the
  // database, and with it its writer thread, before the error goes on: a CLI run then
  // exits as it should.
  const keySource = masterKeySource(config.masterKey, config.dataDir)
  let keyFileMade = false
  const { secrets, daySecret, createdRootKey, nodes } = await (async () => {
    await migrate(db, dialect, 'kernel', coreMigrations(dialect))
    for (const plugin of plugins) if (plugin.migrations) await migrate(db, dialect, plugin.name, plugin.migrations)
    keyFileMade = makeGeneratedKeyFile(keySource)
    const secrets = masterSecretBox(config.masterKey, config.dataDir)
    const { daySecret, createdRootKey } = await oneStartAtATime(db, dialect, async () => {
      const daySecret = await loadDaySecret(db, secrets)
      // Remembered so a master-key rotation run without one of these plugins refuses instead of losing its secrets.
      await recordSealedColumns(db, plugins)
      return { daySecret, createdRootKey: await bootstrap(db, secrets, plugins, { dataDir: config.dataDir, now: clock() }) }
    })
    const nodes = await NodeRegistry.start(db, { ...config.nodes, nodeId: config.nodeId, serverName: config.serverName, host: config.host, report })
    return { secrets, daySecret, createdRootKey, nodes }
  })().catch(async (error) => {
    // A key file this start made that does not open the database has sealed nothing: it
    // goes with the refused start, so the folder does not hold a key that looks like the one to keep.
    if (keyFileMade && error instanceof MasterKeyMismatch && keySource.kind === 'file') rmSync(keySource.file, { force: true })
    await database.close()
    throw error
  })
  // The start's work may rightly wait longer (migrations, the start lock); calls may not (D6).
  database.limitQueryTime()

  const keys = new KeyDirectory(db, secrets, clock, config.cache.maxEntries, config.cache.keyTtlSeconds)
  // With Redis every process (cluster workers too) counts in Redis directly (D16).
  const redis = config.redisUrl ? new RedisLink(config.redisUrl, logger) : null
  const redisInvalidation = redis ? new RedisInvalidation(redis, report) : undefined
  if (redis) await Promise.all([redis.connected(), redisInvalidation!.start()])
  // In memory, rate counts are bounded per window (rateCountsMax: 100,000 keys, or twice
  // the loaded keys when more).
  const limiterStore = redis ? redisLimiters(redis.commands, clock) : options.cluster?.limiters ?? inMemoryLimiters(clock, rateCountsMax(config.cache.maxEntries))
  const rateLimits = new RateLimits(limiterStore)
  const credits = new CreditLedger(db, clock)
  // Used write signatures: in the database, with Redis or without (every process, every
  // restart). Not in Redis: while it is away that memory would be one process's only.
  const usedSignatures = new DatabaseSignatures(db, clock)
  usedSignatures.startPurging(10 * 60_000, report)
  const replayGuard = new ReplayGuard(usedSignatures)
  // Never more than the keys loaded: each entry holds its key's record.
  const signatures = new SignatureMemory(Math.min(signatureMemoryMax, config.cache.maxEntries))
  const idempotency = new IdempotencyStore(db, secrets, clock, 2 * config.timeouts.requestMs, report)
  idempotency.startPurging(10 * 60_000)
  const requestIds = new RequestIds(nodes.nodeId, clock)
  const cache = new ResponseCache(config.cache.maxEntries, config.cache.responseBytes)
  const callLog = new CallLog(db, config.log, clock, report, nodes.nodeId, (batch) => {
    const { rows, texts } = withSharedAnswers(batch)
    return database.insertMany('api_log', rows, { table: 'api_log_body', texts })
  }, async () => (await nodes.live()).some((server) => server.nodeId !== nodes.nodeId))
  requestIds.resumeAfter(await callLog.lastId())
  followNodeId(nodes, requestIds, () => callLog.lastId(), report, [callLog])
  callLog.startPurging()
  const auditRetention = new AuditRetention(db, clock, config.audit?.retentionDays ?? defaultAuditRetentionDays)
  auditRetention.start(60 * 60_000, report)
  callLog.flushObserver = (seconds) => metrics.observeFlush(seconds)

  // Key and ACL changes of other processes (the operator CLI) arrive through the database's stamp:
  // always without Redis, and with Redis for a change it could not publish.
  const accessStamp = new AccessStamp(db, report)
  // Every serving process subscribes, and so does this one when it serves none (the CLI).
  const subscribers = async () => {
    const live = await nodes.live()
    return live.length + (live.some((server) => server.nodeId === nodes.nodeId) ? 0 : 1)
  }
  // Cached listings a people write made stale, for the other hosts on a shared MySQL database
  // when Redis does not tell them (SQLite's processes are one host's cluster, told by its primary).
  const partitionChanges = dialect === 'mysql' ? new PartitionChanges(db, report) : undefined
  const invalidateEverywhere = invalidation(keys, cache, options.cluster, redisInvalidation, accessStamp, subscribers, partitionChanges)
  const tenants = new Tenants(db, dialect, clock, config.people.timeZone)
  const events = new EventBus(db, report)
  const keyAdministration = new KeyAdministration(db, dialect, secrets, clock, {
    key: (keyId) => invalidateEverywhere({ kind: 'key', keyId }),
    access: () => invalidateEverywhere({ kind: 'access' }),
  }, tenants, events)
  const closers: (() => Promise<void>)[] = []
  const starters: (() => void)[] = []
  const services: KernelServices = {
    config,
    version: packageVersion,
    // Loaded in config order first (pluginLoader.ts): the names of exactly the entries config `plugins` holds.
    plugins: plugins.slice(0, config.plugins.length).map((plugin) => plugin.name),
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
      usage: (scope, query) => callLog.usage(scope, query),
    },
    rateLimits: { status: (caller) => rateLimits.status(caller, clock()), tenantStatus: (caller) => rateLimits.tenantStatus(caller, clock()) },
    credits: { status: (keyId) => credits.status(keyId) },
    servers: { live: () => nodes.live() },
    routes: routeCatalog(plugins, () => routes.routes()),
    history: mergedHistory(plugins),
    tenants,
    events: { subscribe: (handler) => events.subscribe(handler), emit: async (trx, event) => void (await events.emit(trx, event)) },
    audit: {
      record: (trx, call, change) => recordChange(trx, clock(), {
        who: call.caller.id, parent: call.caller.parent, custno: call.caller.custno, action: change.action,
        before: change.before, after: change.after, requestId: call.requestId,
      }),
    },
    secrets: { seal: (plaintext, context) => secrets.seal(plaintext, context), open: (sealed, context) => secrets.open(sealed, context) },
    onClose: (stop) => void closers.push(stop),
    onServe: (start) => void starters.push(start),
    log: logger,
  }

  // What a kernel has started by the time its plugins are set up, stopped in order: by
  // close(), and by a start that fails in a plugin (a CLI run then exits as it should).
  const stopStarted = async () => {
    for (const stop of closers) await stop()
    idempotency.stop()
    usedSignatures.stop()
    auditRetention.stop()
    // A change still being published may yet write the stamp or a partition change (Redis
    // did not reach every process): it is written before they stop and the database closes.
    await atMost(3000, invalidateEverywhere.spread())
    await accessStamp.stop()
    await partitionChanges?.stop()
    const lostRecords = await callLog.close()
    await metrics.close()
    for (const plugin of plugins) await plugin.close?.()
    // The operator CLI's last changes are published before the connection goes.
    await redisInvalidation?.inFlight()
    await redis?.close()
    // Bounded: with the database away each would wait out a query's time limit, and the
    // stop already waited for the call log. An id not given back expires by itself.
    await atMost(2000, nodes.release())
    await atMost(5000, database.close())
    // Said last, once everything is closed: the stop then exits 1 (a supervisor sees it).
    if (lostRecords > 0) throw new Error(`${lostRecords} call log records could not be written before shutdown (the database did not answer for 10 s)`)
  }

  const routes = new RouteTable(config.basePath)
  try {
    for (const plugin of plugins) {
      // Each plugin's lines say which plugin wrote them.
      const declared = await Promise.resolve().then(() => plugin.setup({ ...services, log: logger.child({ plugin: plugin.name }) })).catch((error: Error) => {
        throw new Error(`plugin ${plugin.name}: setup failed: ${error?.message ?? error}`)
      })
      if (!Array.isArray(declared)) throw new PluginError(`plugin ${plugin.name}: setup must return an array of routes`)
      for (const route of declared) routes.add(plugin.name, route)
    }
    const hidden = hiddenRoute(config.basePath, mounts, routes.routes())
    if (hidden) throw new ConfigError(hidden)
  } catch (error) {
    await stopStarted().catch(() => {})
    // The first start's root key exists by now; this start never gets to print it.
    if (createdRootKey && error instanceof Error) error.message += ` (this first start made the root admin key: it is in ${createdRootKey.file})`
    throw error
  }
  // Issue 17: usage thresholds and expiry warnings are noticed only when a plugin listens.
  const expiryScan = new ExpiryScan(db, events, clock, report)
  if (events.subscribed) {
    const usage = new UsageEvents(db, events, clock)
    rateLimits.countWatcher = (caller, window, quota, used, resetMs) => usage.counted(caller, window, quota, used, resetMs)
    credits.spendWatcher = (keyId) => void usage.spent(keyId).catch(report)
    // Scanned by serving processes only (listen): an operator CLI run is no service.
    starters.push(() => expiryScan.start(config.events?.expiryScanMs ?? 60_000))
  }

  // Observers see every answered call once its answer is final (access line, metrics).
  // Metrics are kept only when something can scrape them (metrics.port set).
  const proxies = proxyTrust(config.trustProxy)
  const observers = [
    ...(config.metrics && config.metrics.port !== 0 ? [metrics.stage()] : []),
    accessLogStage(logger, config.log.access ?? 'errors', proxies.clientAddress),
  ]
  const pipelines = buildPipelines({ config, keys, rateLimits, credits, requestIds, callLog, cache, replayGuard, signatures, idempotency, daySecret, clock, report, proxies, observers, publishing: changesInFlight(redisInvalidation, options.cluster) })
  const health = healthResponder({ ping: () => sql`select 1`.execute(db), logQueue: () => ({ queued: callLog.queued, max: config.log.queueMax }), closing: () => closing !== null,
    degraded: redis ? () => (redis.reachable ? null : 'redis unreachable; rate limits per process') : undefined })
  const staticFiles = staticFilesResponder(mounts)
  const server = createServer({ config, routes, clock, report, pipelines, outsideBasePath: (request, response) => health(request, response) || staticFiles(request, response), clusterWorker: options.cluster !== undefined })

  let closing: Promise<void> | null = null
  let starting: Promise<unknown> | null = null
  return {
    config,
    services,
    database,
    secrets,
    sealedColumns: pluginSealedColumns(plugins),
    redisReachable: () => (redis ? redis.reachable : null),
    createdRootKey,
    daySecret,
    logger,
    cacheSizes: () => ({ ...keys.sizes, responses: cache.size, responseBodies: cache.sharedBodies, rateCounts: rateLimits.counted, signatures: signatures.size, partitionMarks: cache.partitionMarks }),
    routes: () => routes.routes().map(({ plugin, route }) => ({ plugin, method: route.method, path: route.path, dayCode: route.dayCode === true, hasBody: route.body !== undefined })),
    listen() {
      // A kernel being closed (a SIGTERM while it started) does not begin to serve.
      if (closing) return Promise.reject(new Error('the kernel is closing; it does not listen'))
      const serving = serve()
      starting = serving
      return serving
    },
    close() {
      closing ??= (async () => {
        // A listen under way (a SIGTERM just as it starts serving) finishes first: closed
        // before it, the server would open its port after the close, on a closed database.
        await starting?.catch(() => {})
        await server.close()
        await expiryScan.stop()
        await stopStarted()
      })()
      return closing
    },
  }

  async function serve(): Promise<{ port: number; url: string }> {
    // Said by a serving process only, not by every operator CLI command.
    for (const [plugin, operations] of routesMissingFromHistory(plugins, routes.routes())) {
      logger.warn({ plugin, routes: operations }, `plugin ${plugin}: no "added" entry in its change history (history.json) for ${operations.join(', ')}; these routes are missing from GET /Api/Read/Changes and its feed`)
    }
    // A cluster worker's numbers are served, summed with the other workers', by the primary.
    if (options.cluster) metrics.reportToPrimary(config.metrics)
    else await metrics.listen(config.metrics)
    // Only a serving process watches; the CLI's kernel only writes the stamp.
    await accessStamp.watch(accessStampEveryMs(config.cache.keyTtlSeconds), () => {
      keys.forgetAll()
      cache.clear()
    })
    await partitionChanges?.watch(partitionChangesEveryMs, (partition) => cache.invalidate(partition))
    const listening = await server.listen()
    await nodes.serving(listening.port)
    for (const start of starters) start()
    return listening
  }
}
