/**
 * The service behind `npm start` (kernel/boot/main.ts loads it): load config, start the kernel (or, with `workers` > 1, a primary and
 * that many workers on one port), print the first admin key once, and stop cleanly on
 * SIGTERM/SIGINT: no new connections, in-flight calls finish, the call log is flushed,
 * exit 0. This node process is the service: a supervisor's SIGTERM reaches it directly.
 * Everything it says goes to stdout as pino JSON lines (kernel/observe/logger.ts), except
 * the first-start root key (a human-readable block, once: D10) and a config error (one
 * plain line on stderr, before there is a logger to configure).
 */
import cluster from 'node:cluster'
import { join } from 'node:path'
import { loadConfig, ConfigError, type Config } from './config.ts'
import { PluginError } from './pluginError.ts'
import { startFailure } from './startFailure.ts'
import { createKernel, type Kernel } from './kernel.ts'
import { servePrimary, workerLink } from './cluster.ts'
import { MasterKeyFileError, masterKeyWarning } from '../auth/masterKey.ts'
import { MasterKeyMismatch, type RootKey } from './bootstrap.ts'
import { NewerDatabase } from '../storage/migrator.ts'
import { createLogger, type Logger } from '../observe/logger.ts'
import { listenAggregated } from '../observe/metrics.ts'
import { packageVersion } from './packageRoot.ts'
import { missingMallocSettings } from './mallocSettings.ts'

function announceRootKey(config: Config, root: RootKey | null): void {
  if (!root) return
  const usual = join(config.dataDir, 'admin-key.json')
  // A second database bootstrapped into one folder: the older key file stays as it was.
  const elsewhere = root.file === usual ? '' : `${usual} exists already (another database's root key) and was left as it is; `
  console.log(
    `\nFirst start: created the root admin key (shown once; ${elsewhere}also in ${root.file}, mode 0600)\n` +
      `  Id:         ${root.id}\n  Api_Key:    ${root.apiKey}\n  Api_Secret: ${root.secret}\n` +
      `Try it: npm run --silent call -- GET /Api/Read/Acl${root.file === usual ? '' : ` --key-file ${root.file}`}\n`,
  )
}

function onStopSignal(logger: Logger, stop: (signal: string) => Promise<void>): void {
  let stopping = false
  const handler = (signal: string) => {
    if (stopping) return
    stopping = true
    stop(signal).then(
      () => {
        logger.info({ signal }, 'keygate stopped')
        process.exit(0)
      },
      (error) => {
        logger.error({ err: error }, 'keygate: error while stopping')
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', () => handler('SIGTERM'))
  process.on('SIGINT', () => handler('SIGINT'))
}

function describe(config: Config, url: string): string {
  const database = config.databaseUrl ? `MySQL (${new URL(config.databaseUrl).host})` : `SQLite in ${config.dataDir}`
  return `keygate listening on ${url} - ${database}, plugins: ${config.plugins.join(', ')}`
}

function metricsAddress(config: Config): string | null {
  if (!config.metrics || config.metrics.port === 0) return null
  const host = config.metrics.host.includes(':') ? `[${config.metrics.host}]` : config.metrics.host
  return `http://${host}:${config.metrics.port}/metrics`
}

/** Listens, or closes the kernel before the error goes on: a start that fails (a port in use) leaves no node id held for `nodes.expireMs`. */
async function listening(kernel: Kernel): Promise<{ url: string }> {
  try {
    return await kernel.listen()
  } catch (error) {
    await kernel.close().catch(() => {})
    throw error
  }
}

/**
 * Stops on SIGTERM/SIGINT from the moment the kernel starts being made: a signal that
 * comes while it starts (migrations, a primary stopping its workers) closes it once made,
 * so its node id is released rather than held for `nodes.expireMs`. Answers whether a
 * stop was asked for: a kernel made after the signal must not start listening (it would
 * take new connections and say `keygate listening` after the stop began, and its listen
 * would run on beside the close).
 */
function stoppable(starting: Promise<Kernel>, logger: Logger, announce?: (signal: string) => void): () => boolean {
  let asked = false
  onStopSignal(logger, async (signal) => {
    asked = true
    announce?.(signal)
    const kernel = await starting.catch(() => null)
    await kernel?.close()
  })
  return () => asked
}

async function single(config: Config, logger: Logger): Promise<void> {
  const starting = createKernel({ config, logger })
  const stopAsked = stoppable(starting, logger, (signal) => logger.info({ signal }, `keygate: ${signal}, finishing in-flight calls and flushing the call log`))
  const kernel = await starting
  // Stopped while it started: the signal's handler closes it. The root key made is still shown once.
  if (stopAsked()) return announceRootKey(config, kernel.createdRootKey)
  const { url } = await listening(kernel)
  logger.info({ version: packageVersion, url, metrics: metricsAddress(config) }, describe(config, url))
  announceRootKey(config, kernel.createdRootKey)
}

async function primary(config: Config, logger: Logger): Promise<void> {
  let stopping = false
  let closeMetrics: (() => Promise<void>) | null = null
  // Each worker's exit code: one that could not stop cleanly (call-log records it could not write) exits 1.
  const stopAll = () => Promise.all(Object.values(cluster.workers ?? {}).map((worker) => new Promise<number>((resolve) => {
    if (!worker || worker.isDead()) return resolve(0)
    worker.once('exit', (code) => resolve(code ?? 0))
    worker.process.kill('SIGTERM')
  })))
  // Migrations and first start run once, here, before any worker opens the database.
  const settingUp = createKernel({ config: { ...config, metrics: undefined }, logger }).then(async (setup) => {
    await setup.close()
    return setup.createdRootKey
  })
  // From the first moment, not once the workers listen: a signal during the start (a
  // supervisor giving up on it) lets the setup close and the workers started so far stop.
  onStopSignal(logger, async (signal) => {
    stopping = true
    logger.info({ signal }, `keygate: ${signal}, stopping ${config.workers} workers`)
    await settingUp.catch(() => null)
    const codes = await stopAll()
    await closeMetrics?.()
    // The worker's own line says why; the primary's exit code says it to the supervisor.
    if (codes.some((code) => code !== 0)) throw new Error('a worker did not stop cleanly (see its line above)')
  })
  const root = await settingUp
  // Stopped while it set up: no workers; the root key made is still shown once.
  if (stopping) return announceRootKey(config, root)
  // One listener, here: each scrape sums the workers' registries (not one worker's numbers).
  if (config.metrics && config.metrics.port !== 0) closeMetrics = await listenAggregated(config.metrics, {
    failed: (error) => logger.warn({ err: error }, 'metrics: a scrape failed, answered 503 (a worker that has not answered yet: just started, frozen or busy?)'),
    unanswered: (pids) => logger.warn({ pids }, `metrics: worker pid ${pids.join(', ')} did not answer within 5 s (frozen or busy?); its last numbers were served`),
  })
  servePrimary()
  const fork = (index: number) => {
    // glibc reads its settings as a process starts: the workers serve, so they get them (mallocSettings.ts).
    const worker = cluster.fork({ ...missingMallocSettings(process.env), KEYGATE_WORKER_INDEX: String(index) })
    let served = false
    // Served once its API listener is up (a metrics listener may come up first and say nothing).
    worker.on('listening', (address) => {
      if (!config.metrics?.port || address.port !== config.metrics.port) served = true
    })
    worker.on('exit', (code, signal) => {
      if (stopping) return
      if (!served) {
        // It could not start (its own line says why: a port in use, say); another would fail
        // the same way, so the primary stops and exits 1 and the supervisor (systemd, compose) sees it.
        stopping = true
        logger.fatal({ worker: index, exit: signal ?? code }, `keygate: worker ${index} could not start (${signal ?? code}); stopping`)
        void stopAll().then(() => process.exit(1))
        return
      }
      logger.error({ worker: index, exit: signal ?? code }, `keygate: worker ${index} exited (${signal ?? code}); starting another`)
      fork(index)
    })
    return worker
  }
  const workers = Array.from({ length: config.workers }, (_, index) => fork(index))
  await Promise.all(workers.map((worker) => new Promise((resolve) => worker.once('listening', resolve))))
  const host = config.host.includes(':') ? `[${config.host}]` : config.host
  const url = `${config.tls ? 'https' : 'http'}://${host}:${config.port}${config.basePath}`
  logger.info({ version: packageVersion, url, workers: config.workers, metrics: metricsAddress(config) }, `${describe(config, url)}; ${config.workers} workers`)
  announceRootKey(config, root)
}

async function worker(config: Config, logger: Logger): Promise<void> {
  const index = Number(process.env.KEYGATE_WORKER_INDEX ?? 0)
  const starting = createKernel({ config: { ...config, nodeId: config.nodeId === null ? null : config.nodeId + index }, cluster: workerLink(), logger: logger.child({ worker: index }) })
  const stopAsked = stoppable(starting, logger)
  const kernel = await starting
  if (!stopAsked()) await listening(kernel)
}

async function main(logger: Logger): Promise<void> {
  let config: Config
  try {
    config = loadConfig()
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`keygate: ${error.message}`)
      process.exit(1)
    }
    throw error
  }
  const warning = cluster.isPrimary ? masterKeyWarning(config.masterKey, config.dataDir) : null
  if (warning) logger.warn(warning)
  try {
    if (config.workers <= 1) return await single(config, logger)
    return await (cluster.isPrimary ? primary(config, logger) : worker(config, logger))
  } catch (error) {
    throw startFailure(error, config) ?? error
  }
}

const usage = 'usage: keygate [--version]\nSettings come from the environment or CONFIG_FILE (README, "Configuration").'

/**
 * Runs the command line `keygate [--version|--help]`. `stopBeforeStart` is a SIGTERM or
 * SIGINT that came while this module loaded (kernel/boot/main.ts heard it): nothing has
 * been opened or made yet, so the start ends there, with exit 0 as any later stop.
 */
export function runService(argv: string[], stopBeforeStart: string | null): void {
  const [argument, ...more] = argv
  if ((argument === '--version' || argument === '-v') && more.length === 0) {
    console.log(packageVersion)
  } else if ((argument === '--help' || argument === '-h') && more.length === 0) {
    console.log(usage)
  } else if (argument !== undefined) {
    // Not started with defaults on a mistyped flag: that would make ./data and a root key where it was run.
    console.error(`keygate: unknown argument '${[argument, ...more].join(' ')}'\n${usage}`)
    process.exitCode = 2
  } else if (stopBeforeStart !== null) {
    createLogger().info({ signal: stopBeforeStart }, 'keygate stopped')
    process.exit(0)
  } else {
    const logger = createLogger()
    main(logger).catch((error) => failedStart(error, logger))
  }
}

function failedStart(error: unknown, logger: Logger): never {
  // A wrong master key is the operator's to fix: one line that says so, no stack.
  // So is a downgrade: a newer version's migrations found, nothing run or written.
  if (error instanceof MasterKeyMismatch || error instanceof NewerDatabase) {
    console.error(`keygate: ${error.message}`)
    process.exit(1)
  }
  if (error instanceof MasterKeyFileError) {
    console.error(`keygate: invalid setting masterKey: ${error.message}`)
    process.exit(1)
  }
  if (error instanceof PluginError) {
    console.error(`keygate: invalid setting plugins: ${error.message}`)
    process.exit(1)
  }
  // A setting found wrong only once the plugins' routes are known (basePath under the console).
  if (error instanceof ConfigError) {
    console.error(`keygate: ${error.message}`)
    process.exit(1)
  }
  logger.fatal({ err: error }, `keygate: could not start: ${(error as Error).message ?? error}`)
  process.exit(1)
}
