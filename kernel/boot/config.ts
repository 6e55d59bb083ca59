import { readFileSync, existsSync } from 'node:fs'
import { resolve, dirname, join } from 'node:path'
import { isIP } from 'node:net'
import { Ajv } from 'ajv'
import { isTimeZone } from '../tenants/timeZone.ts'
import { parseAddressRange } from './addressRange.ts'
import { masterKeySource } from '../auth/masterKey.ts'
import { packageRoot } from './packageRoot.ts'
import { plainAddress } from '../http/transport.ts'
import { idLagLimitMs } from '../callLog/requestId.ts'
import { tlsFilesProblem } from './tlsFiles.ts'

/** The most processes WORKERS may start (request ids have room for 16 node ids, D8). */
export const maxWorkers = 16

/** The whole configuration of one kernel instance, after defaults, file and environment. */
export interface Config {
  host: string
  port: number
  basePath: string
  dataDir: string
  /** `mysql://user:pass@host:3306/db`; null or absent = embedded SQLite in dataDir. */
  databaseUrl: string | null
  /**
   * MySQL/MariaDB: how long a statement, or a wait for a pooled connection, may take
   * before the call answers 503 (D6: a database that stops answering without refusing,
   * as a paused server or a firewall drop does). Absent = the default (10 s).
   */
  database?: { queryTimeoutMs: number }
  /**
   * `redis://[:pass@]host:6379/0` (or `rediss://`): rate limits, replay memory and cache
   * invalidation shared by every process of the service (D16). Null = per process.
   */
  redisUrl?: string | null
  /**
   * The enabled plugins: a built-in name (`plugins/<name>/`), a folder path (`./`, `../` or
   * absolute) or an installed npm package. A disabled plugin's paths do not exist (D1).
   */
  plugins: string[]
  bodyLimit: number
  /** Peer addresses whose `X-Forwarded-Proto` is believed (a TLS-terminating proxy). */
  trustProxy: string[]
  tls: { certFile: string; keyFile: string } | null
  /** 64 hex chars, or the path of a file holding them (contains a `/`); when null a key is generated into dataDir/master.key (0600). */
  masterKey: string | null
  /**
   * 0-15, distinguishes processes inside request ids (D8); cluster workers add their
   * index. Null (the default): each process claims a free one from the database (D16).
   */
  nodeId: number | null
  /** Processes serving the port (node:cluster); 1 = this process alone. */
  workers: number
  /** Server_Name of log records and servers; `{node}` becomes the process's Node_Id (kernel/cluster/serverName.ts). */
  serverName: string
  timeouts: { headersMs: number; requestMs: number; keepAliveMs: number; maxHeaderSize: number }
  cache: { maxEntries: number; responseBytes: number; keyTtlSeconds: number; responses: boolean }
  /** People directory settings; timeZone is the IANA zone of tenants that set none (D14). */
  people: { timeZone: string }
  log: {
    detailDays: number
    recordDays: number
    batchSize: number
    flushMs: number
    queueMax: number
    purgeEveryMs: number
    purgeBatch: number
    /** Request headers stored as [redacted] at LogLevel 2, beside the credential headers always redacted. */
    redactHeaders?: string[]
    /** Access line per call on stdout: every call, only 4xx/5xx (default), or none. */
    access?: 'all' | 'errors' | 'none'
  }
  /** The node registry (D16): how often a process says it is alive, and when it counts as gone. */
  nodes: { heartbeatMs: number; expireMs: number }
  /** Prometheus listener (kernel/observe/metrics.ts); port 0 = off. */
  metrics?: { port: number; host: string }
  /** The audit trail (issue 16): days a record is kept; absent = one year. */
  audit?: { retentionDays: number }
  /** The web console at /console/ (plugins/console), outside the base path; on by default. */
  console?: { enabled: boolean }
  /** Events (issue 17): how often keys near their EndDate are looked for; absent = every minute. */
  events?: { expiryScanMs: number }
  /** The webhooks plugin (issue 17); absent = its defaults (https only, no private address). */
  webhooks?: WebhookSettings
}

/** Where and how webhooks are delivered (issue 17, docs/webhooks.md). */
export interface WebhookSettings {
  /** http:// URLs too (otherwise https only). */
  allowHttp: boolean
  /** Addresses or CIDR ranges a delivery may reach although private, loopback or link-local. */
  allowAddresses: string[]
  /** One attempt's limit: connecting, sending, and the receiver's answer. */
  timeoutMs: number
  /** The wait before the first retry; each next one doubles it (with jitter), up to maxRetryDelayMs. */
  firstRetryMs: number
  maxRetryDelayMs: number
  /** How long a delivery is retried before it is marked failed (24 hours). */
  retryForMs: number
  /** How often each process looks for due deliveries. */
  pollMs: number
  /** The most webhooks one tenant (Parent, Custno) may have; a create beyond it is 403. */
  maxPerTenant: number
}

const positiveInt = { type: 'integer', minimum: 1 }
const schema = {
  type: 'object',
  additionalProperties: false,
  required: ['host', 'port', 'basePath', 'dataDir', 'plugins', 'bodyLimit', 'nodeId', 'workers', 'timeouts', 'cache', 'log'],
  properties: {
    host: { type: 'string', minLength: 1 },
    port: { type: 'integer', minimum: 0, maximum: 65535 },
    basePath: { type: 'string', pattern: '^(/[A-Za-z0-9._~-]+)*$' },
    dataDir: { type: 'string', minLength: 1 },
    databaseUrl: { type: ['string', 'null'], pattern: '^mysql://' },
    database: {
      type: 'object',
      additionalProperties: false,
      required: ['queryTimeoutMs'],
      properties: { queryTimeoutMs: { type: 'integer', minimum: 100, maximum: 3_600_000 } },
    },
    redisUrl: { type: ['string', 'null'], pattern: '^rediss?://' },
    plugins: {
      type: 'array',
      uniqueItems: true,
      // A built-in or npm package name (`people`, `@team/keygate-notes`), or a folder path (`./notes`, `/opt/notes`).
      items: { type: 'string', maxLength: 500, pattern: '^(?:(?:@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*|\\.{1,2}/.+|/.+)$' },
    },
    bodyLimit: { type: 'integer', minimum: 1024, maximum: 104857600 },
    trustProxy: { type: 'array', items: { type: 'string', minLength: 1 } },
    // One schema for both (not anyOf null | object): a missing keyFile is then named as such, not as "must be null".
    tls: {
      type: ['object', 'null'],
      additionalProperties: false,
      required: ['certFile', 'keyFile'],
      properties: { certFile: { type: 'string', minLength: 1 }, keyFile: { type: 'string', minLength: 1 } },
    },
    masterKey: { type: ['string', 'null'], pattern: '^([0-9a-fA-F]{64}|.*/.*)$' },
    nodeId: { type: ['integer', 'null'], minimum: 0, maximum: 15 },
    workers: { type: 'integer', minimum: 1, maximum: maxWorkers },
    serverName: { type: 'string', minLength: 1, maxLength: 100 },
    timeouts: {
      type: 'object',
      additionalProperties: false,
      required: ['headersMs', 'requestMs', 'keepAliveMs', 'maxHeaderSize'],
      properties: {
        headersMs: { type: 'integer', minimum: 100, maximum: 30000 },
        // At most idLagLimitMs: a call's log record is found by its arrival within that of its id.
        requestMs: { type: 'integer', minimum: 100, maximum: idLagLimitMs },
        keepAliveMs: { type: 'integer', minimum: 100 },
        maxHeaderSize: { type: 'integer', minimum: 1024, maximum: 1048576 },
      },
    },
    cache: {
      type: 'object',
      additionalProperties: false,
      required: ['maxEntries', 'responseBytes', 'keyTtlSeconds', 'responses'],
      properties: { maxEntries: positiveInt, responseBytes: { type: 'integer', minimum: 65536 }, keyTtlSeconds: positiveInt, responses: { type: 'boolean' } },
    },
    people: {
      type: 'object',
      additionalProperties: false,
      required: ['timeZone'],
      properties: { timeZone: { type: 'string', minLength: 1, maxLength: 64 } },
    },
    log: {
      type: 'object',
      additionalProperties: false,
      required: ['detailDays', 'recordDays', 'batchSize', 'flushMs', 'queueMax', 'purgeEveryMs', 'purgeBatch'],
      properties: {
        detailDays: positiveInt,
        recordDays: positiveInt,
        batchSize: positiveInt,
        flushMs: positiveInt,
        queueMax: positiveInt,
        purgeEveryMs: positiveInt,
        purgeBatch: positiveInt,
        redactHeaders: { type: 'array', items: { type: 'string', pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" } },
        access: { enum: ['all', 'errors', 'none'] },
      },
    },
    nodes: {
      type: 'object',
      additionalProperties: false,
      required: ['heartbeatMs', 'expireMs'],
      properties: { heartbeatMs: { type: 'integer', minimum: 50 }, expireMs: { type: 'integer', minimum: 100 } },
    },
    events: {
      type: 'object',
      additionalProperties: false,
      required: ['expiryScanMs'],
      properties: { expiryScanMs: { type: 'integer', minimum: 50 } },
    },
    webhooks: {
      type: 'object',
      additionalProperties: false,
      required: ['allowHttp', 'allowAddresses', 'timeoutMs', 'firstRetryMs', 'maxRetryDelayMs', 'retryForMs', 'pollMs', 'maxPerTenant'],
      properties: {
        allowHttp: { type: 'boolean' },
        allowAddresses: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 64 } },
        timeoutMs: { type: 'integer', minimum: 100, maximum: 120_000 },
        firstRetryMs: { type: 'integer', minimum: 10 },
        maxRetryDelayMs: { type: 'integer', minimum: 10 },
        retryForMs: { type: 'integer', minimum: 1000 },
        pollMs: { type: 'integer', minimum: 10 },
        maxPerTenant: { type: 'integer', minimum: 0, maximum: 100_000 },
      },
    },
    audit: {
      type: 'object',
      additionalProperties: false,
      required: ['retentionDays'],
      properties: { retentionDays: positiveInt },
    },
    console: {
      type: 'object',
      additionalProperties: false,
      required: ['enabled'],
      properties: { enabled: { type: 'boolean' } },
    },
    metrics: {
      type: 'object',
      additionalProperties: false,
      required: ['port', 'host'],
      properties: { port: { type: 'integer', minimum: 0, maximum: 65535 }, host: { type: 'string', minLength: 1 } },
    },
  },
} as const

/** Raised for a bad setting; the start script prints its one line and exits 1. */
export class ConfigError extends Error {}

/** Environment variables and the setting each one sets. */
const environmentSettings: Record<string, { path: string[]; type: 'string' | 'integer' | 'list' | 'nullable' | 'boolean' }> = {
  HOST: { path: ['host'], type: 'string' },
  PORT: { path: ['port'], type: 'integer' },
  BASE_PATH: { path: ['basePath'], type: 'string' },
  DATA_DIR: { path: ['dataDir'], type: 'string' },
  DATABASE_URL: { path: ['databaseUrl'], type: 'nullable' },
  DATABASE_QUERY_TIMEOUT_MS: { path: ['database', 'queryTimeoutMs'], type: 'integer' },
  REDIS_URL: { path: ['redisUrl'], type: 'nullable' },
  PLUGINS: { path: ['plugins'], type: 'list' },
  BODY_LIMIT: { path: ['bodyLimit'], type: 'integer' },
  TRUST_PROXY: { path: ['trustProxy'], type: 'list' },
  MASTER_KEY: { path: ['masterKey'], type: 'nullable' },
  NODE_ID: { path: ['nodeId'], type: 'integer' },
  SERVER_NAME: { path: ['serverName'], type: 'string' },
  CACHE_RESPONSES: { path: ['cache', 'responses'], type: 'boolean' },
  WORKERS: { path: ['workers'], type: 'integer' },
  PEOPLE_TIME_ZONE: { path: ['people', 'timeZone'], type: 'string' },
  LOG_ACCESS: { path: ['log', 'access'], type: 'string' },
  METRICS_PORT: { path: ['metrics', 'port'], type: 'integer' },
  METRICS_HOST: { path: ['metrics', 'host'], type: 'string' },
  CONSOLE_ENABLED: { path: ['console', 'enabled'], type: 'boolean' },
  EVENTS_EXPIRY_SCAN_MS: { path: ['events', 'expiryScanMs'], type: 'integer' },
  WEBHOOKS_ALLOW_HTTP: { path: ['webhooks', 'allowHttp'], type: 'boolean' },
  WEBHOOKS_ALLOW_ADDRESSES: { path: ['webhooks', 'allowAddresses'], type: 'list' },
  WEBHOOKS_FIRST_RETRY_MS: { path: ['webhooks', 'firstRetryMs'], type: 'integer' },
  WEBHOOKS_POLL_MS: { path: ['webhooks', 'pollMs'], type: 'integer' },
  WEBHOOKS_MAX_PER_TENANT: { path: ['webhooks', 'maxPerTenant'], type: 'integer' },
}

const defaultsFile = join(packageRoot, 'config', 'defaults.json')

function mergeDeep(target: Record<string, unknown>, source: Record<string, unknown>): Record<string, unknown> {
  for (const [name, value] of Object.entries(source)) {
    const current = target[name]
    if (value && typeof value === 'object' && !Array.isArray(value) && current && typeof current === 'object' && !Array.isArray(current)) {
      target[name] = mergeDeep({ ...(current as Record<string, unknown>) }, value as Record<string, unknown>)
    } else {
      target[name] = value
    }
  }
  return target
}

function readJson(file: string, label: string): Record<string, unknown> {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8'))
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not a JSON object')
    return parsed
  } catch (error) {
    throw new ConfigError(`${label} ${file}: ${withoutText(error as Error)}`)
  }
}

function fromEnvironment(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const result: Record<string, unknown> = {}
  for (const [variable, setting] of Object.entries(environmentSettings)) {
    const raw = env[variable]
    if (raw === undefined || raw === '') continue
    let value: unknown = raw
    if (setting.type === 'integer') {
      if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(`${variable} must be a whole number, got '${raw}'`)
      value = Number(raw)
    } else if (setting.type === 'boolean') {
      if (!/^(true|false|1|0)$/i.test(raw.trim())) throw new ConfigError(`${variable} must be true or false, got '${raw}'`)
      value = /^(true|1)$/i.test(raw.trim())
    } else if (setting.type === 'list') {
      value = raw.split(',').map((item) => item.trim()).filter(Boolean)
    }
    let node = result
    for (const part of setting.path.slice(0, -1)) node = (node[part] ??= {}) as Record<string, unknown>
    node[setting.path[setting.path.length - 1]] = value
  }
  return result
}

/**
 * Defaults, then the file named by CONFIG_FILE (or config/local.json when present),
 * then environment variables, then `overrides` (tests). Validated once; a bad value
 * throws a ConfigError whose message names the setting.
 */
export function loadConfig(overrides: Partial<Config> = {}, env: NodeJS.ProcessEnv = process.env): Config {
  const merged = mergeDeep({}, readJson(defaultsFile, 'defaults'))
  const localFile = env.CONFIG_FILE ?? resolve(dirname(defaultsFile), 'local.json')
  if (env.CONFIG_FILE || existsSync(localFile)) mergeDeep(merged, readJson(localFile, 'config file'))
  mergeDeep(merged, fromEnvironment(env))
  mergeDeep(merged, overrides as Record<string, unknown>)
  const ajv = new Ajv({ allErrors: false })
  const validate = ajv.compile(schema)
  if (!validate(merged)) {
    const error = validate.errors![0]
    const where = error.instancePath ? error.instancePath.slice(1).replaceAll('/', '.') : 'config'
    const detail = error.keyword === 'additionalProperties'
      ? `unknown setting '${(error.params as { additionalProperty: string }).additionalProperty}'`
      : error.message
    throw new ConfigError(`invalid setting ${where}: ${detail}${shownValue(where, valueAt(merged, error.instancePath))}`)
  }
  const config = merged as unknown as Config
  if (config.nodeId !== null && config.nodeId + config.workers > 16) throw new ConfigError(`invalid setting workers: nodeId + workers must be at most 16 (got ${config.nodeId} + ${config.workers})`)
  // A heartbeat slower than the expiry would make a live process look gone and lose its node id.
  if (config.nodes.heartbeatMs >= config.nodes.expireMs) throw new ConfigError(`invalid setting nodes.heartbeatMs: must be less than nodes.expireMs (got ${config.nodes.heartbeatMs} >= ${config.nodes.expireMs})`)
  // node:http refuses a headers timeout longer than the request's (a RangeError at start, with a stack trace).
  if (config.timeouts.headersMs > config.timeouts.requestMs) throw new ConfigError(`invalid setting timeouts.headersMs: must be at most timeouts.requestMs (got ${config.timeouts.headersMs} > ${config.timeouts.requestMs})`)
  if (!isTimeZone(config.people.timeZone)) throw new ConfigError(`invalid setting people.timeZone: not an IANA time zone (got ${JSON.stringify(config.people.timeZone)})`)
  // A range here would never equal a peer's address: the proxy would silently become the client.
  const badProxy = config.trustProxy.find((entry) => isIP(entry) === 0)
  if (badProxy !== undefined) throw new ConfigError(`invalid setting trustProxy: not an IP address; list each proxy's address, ranges are not accepted (got ${JSON.stringify(badProxy)})`)
  // Compared with a peer's address as node:http gives it (lower case) and an IPv4-mapped one as plain IPv4.
  config.trustProxy = config.trustProxy.map((entry) => {
    const plain = plainAddress(entry.toLowerCase())
    return isIP(plain) === 0 ? entry.toLowerCase() : plain
  })
  const badAddress = config.webhooks?.allowAddresses.find((entry) => parseAddressRange(entry) === null)
  if (badAddress !== undefined) throw new ConfigError(`invalid setting webhooks.allowAddresses: not an IP address or CIDR range (got ${JSON.stringify(badAddress)})`)
  if (config.databaseUrl !== null && config.databaseUrl !== undefined && !URL.canParse(config.databaseUrl)) {
    throw new ConfigError(`invalid setting databaseUrl: not a valid URL${shownValue('databaseUrl', config.databaseUrl)}`)
  }
  if (config.databaseUrl && !decodableUrl(config.databaseUrl)) {
    throw new ConfigError(`invalid setting databaseUrl: a %-escape in the user, password or database name is not valid (write % itself as %25)${shownValue('databaseUrl', config.databaseUrl)}`)
  }
  // Without one the driver connects and every migration fails on "No database selected", with a stack.
  if (config.databaseUrl && /^\/?$/.test(new URL(config.databaseUrl).pathname)) {
    throw new ConfigError(`invalid setting databaseUrl: no database name (mysql://user:pass@host:3306/database)${shownValue('databaseUrl', config.databaseUrl)}`)
  }
  // The pool reads connectionLimit alone (kernel/storage/database.ts): a negative one hung the start, and exited 0.
  for (const [name, value] of config.databaseUrl ? new URL(config.databaseUrl).searchParams : []) {
    if (name !== 'connectionLimit') throw new ConfigError(`invalid setting databaseUrl: unknown parameter '${name}' (the only one is connectionLimit)${shownValue('databaseUrl', config.databaseUrl)}`)
    if (!/^\d{1,4}$/.test(value) || Number(value) < 1 || Number(value) > 1000) {
      throw new ConfigError(`invalid setting databaseUrl: connectionLimit must be a whole number from 1 to 1000${shownValue('databaseUrl', config.databaseUrl)}`)
    }
  }
  // A key file named by MASTER_KEY must be there (the generated one in dataDir is made at the first start).
  const keySource = masterKeySource(config.masterKey, config.dataDir)
  if (keySource.kind === 'file' && !keySource.generated && !existsSync(keySource.file)) {
    throw new ConfigError(`invalid setting masterKey: the key file ${keySource.file} does not exist`)
  }
  if (config.metrics?.port && config.metrics.port === config.port) {
    throw new ConfigError(`invalid setting metrics.port: the same port as the service's own (${config.port})`)
  }
  if (config.redisUrl !== null && config.redisUrl !== undefined && !URL.canParse(config.redisUrl)) {
    throw new ConfigError(`invalid setting redisUrl: not a valid URL${shownValue('redisUrl', config.redisUrl)}`)
  }
  // The path is the database number (ioredis would throw on anything else, with a stack trace).
  if (config.redisUrl && !/^\/?(\d{1,5})?\/?$/.test(new URL(config.redisUrl).pathname)) {
    throw new ConfigError(`invalid setting redisUrl: the path must be a database number, e.g. /0${shownValue('redisUrl', config.redisUrl)}`)
  }
  // The server reads them only once the database is open and migrated: a bad file would stop the start there, with a stack.
  const tlsProblem = config.tls ? tlsFilesProblem(config.tls) : null
  if (tlsProblem) throw new ConfigError(`invalid setting ${tlsProblem.setting}: ${tlsProblem.detail}`)
  // Clients and proxies resolve dot segments before they send a path, so such a base would never be reached.
  if (config.basePath.split('/').some((segment) => segment === '.' || segment === '..')) {
    throw new ConfigError(`invalid setting basePath: '.' and '..' segments are not allowed${shownValue('basePath', config.basePath)}`)
  }
  config.basePath = config.basePath.replace(/\/$/, '')
  config.dataDir = resolve(config.dataDir)
  return config
}

/** The parts of a database URL the driver decodes (kernel/storage/database.ts mysqlPoolOptions) decode. */
function decodableUrl(text: string): boolean {
  const url = new URL(text)
  try {
    for (const part of [url.username, url.password, url.pathname]) decodeURIComponent(part)
    return true
  } catch {
    return false
  }
}

function valueAt(root: unknown, pointer: string): unknown {
  let node = root as Record<string, unknown> | undefined
  for (const part of pointer.split('/').slice(1)) node = node?.[part] as Record<string, unknown> | undefined
  return node
}

/**
 * A JSON syntax error without the file's text: V8 quotes a piece of the input in some
 * messages, and the file may hold the master key or a database password. Only where.
 */
function withoutText(error: Error): string {
  if (error.message === 'not a JSON object') return error.message
  if (!(error instanceof SyntaxError)) return (error as NodeJS.ErrnoException).code ?? 'cannot be read'
  const position = /position (\d+)/.exec(error.message)
  return position ? `not valid JSON (at character ${position[1]})` : 'not valid JSON'
}

/** Settings whose values are never printed, whole or in part. */
const secretSetting = /masterKey|secret|password|token|credential/i

/**
 * `mysql://user:***@host/db`: a URL as it may be printed. Everything before the last `@`
 * but the scheme and user name is masked, so a password holding an unencoded `@` or `/`,
 * or a URL too malformed to parse (`mysql//user:pw@host`), shows none of it.
 */
export function maskedUrl(url: string): string {
  const at = url.lastIndexOf('@')
  if (at === -1) return url
  const user = /^(?:[a-z][a-z0-9+.-]*:\/\/)?[^:/@]*/i.exec(url)![0]
  // A user without a password (`mysql://root@host`) hides nothing.
  return user.length === at ? url : `${user}:***${url.slice(at)}`
}

/**
 * A refused URL with no `@` whose authority has a colon before something other than a
 * port (`mysql://root:pw`, the `@host` forgotten): what follows the colon may be a
 * password, so it is masked too. A `host:3306` stays as it is.
 */
function withoutLoosePassword(url: string): string {
  if (url.includes('@')) return url
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/?#]*):(?!\d*(?:[/?#]|$))[^/?#]*/i, '$1:***')
}

/**
 * The offending value for a config error message, when printing it is safe: plain
 * scalars of settings that hold no secret; a database URL with its password masked;
 * never an object or list (one typo must not print the whole merged config).
 */
function shownValue(where: string, value: unknown): string {
  if (secretSetting.test(where)) return ''
  if ((where === 'databaseUrl' || where === 'redisUrl') && typeof value === 'string') return ` (got ${JSON.stringify(maskedUrl(withoutLoosePassword(value)))})`
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return ` (got ${JSON.stringify(value)})`
  if (typeof value === 'string') return ` (got ${JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}...` : value)})`
  return ''
}
