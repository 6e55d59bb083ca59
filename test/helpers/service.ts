/**
 * Test harness: starts a real kernel on an ephemeral port, on SQLite (a fresh temp
 * folder) or on MariaDB (a fresh database on the server named by TEST_MYSQL_URL,
 * default mysql://root@127.0.0.1:3306), and signs calls with the kernel's own code.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { createConnection } from 'mysql2/promise'
import type { Test } from 'tap'
import { loadConfig, type Config } from '../../kernel/boot/config.ts'
import { createKernel, type Kernel } from '../../kernel/boot/kernel.ts'
import type { Plugin } from '../../kernel/plugin.ts'
import { signedHeaders, type HashMethod, type SigningKey } from '../../kernel/auth/signature.ts'
import { dayCodeAt } from '../../kernel/auth/dayCode.ts'
import { silentLogger, type Logger } from '../../kernel/observe/logger.ts'

export type DatabaseKind = 'sqlite' | 'mysql'

export const mysqlServerUrl = process.env.TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306'
/** In CI a MariaDB that cannot be reached fails the run instead of skipping (.ci/run sets it). */
const mysqlRequired = process.env.CI === 'true' || process.env.REQUIRE_MYSQL === '1'

let mysqlReachable: Promise<string | null> | undefined
function mysqlProblem(): Promise<string | null> {
  mysqlReachable ??= (async () => {
    try {
      const connection = await createConnection(serverOptions())
      await connection.end()
      return null
    } catch (error) {
      return (error as Error).message
    }
  })()
  return mysqlReachable
}

function serverOptions() {
  const url = new URL(mysqlServerUrl)
  return { host: url.hostname, port: Number(url.port || 3306), user: decodeURIComponent(url.username), password: decodeURIComponent(url.password) }
}

/** Runs `body` once per database as a subtest: SQLite always, MariaDB unless unreachable outside CI. */
export async function forEachDatabase(t: Test, body: (t: Test, kind: DatabaseKind) => Promise<void>): Promise<void> {
  await t.test('sqlite', (t) => body(t, 'sqlite'))
  const problem = await mysqlProblem()
  if (problem && !mysqlRequired) {
    await t.test('mysql', { skip: `MariaDB at ${mysqlServerUrl} is not reachable (${problem}); CI requires it` }, async () => {})
    return
  }
  if (problem) {
    t.fail(`MariaDB at ${mysqlServerUrl} is required here (CI) but not reachable: ${problem}`)
    return
  }
  await t.test('mysql', (t) => body(t, 'mysql'))
}

export interface CallOptions {
  body?: unknown
  /** Raw body bytes/text, sent as is (overrides body). */
  rawBody?: string | Buffer
  key?: SigningKey | null
  today?: string | boolean
  date?: string
  hashMethod?: HashMethod
  headers?: Record<string, string>
  contentType?: string
}

export interface CallResult {
  status: number
  headers: Headers
  text: string
  json: any
}

export interface Service {
  kind: DatabaseKind
  kernel: Kernel
  config: Config
  /** http://127.0.0.1:<port>/v1.0 */
  base: string
  port: number
  admin: SigningKey & { id: number }
  /** The current day code (D5). */
  today(at?: number): string
  /** A signed call; path is after the base path, query included. */
  call(method: string, path: string, options?: CallOptions): Promise<CallResult>
  restart(overrides?: Partial<Config>): Promise<Service>
  stop(): Promise<void>
}

export interface StartOptions {
  kind: DatabaseKind
  config?: Partial<Config>
  plugins?: Plugin[]
  clock?: () => number
  /** The service log; default silent (TAP reads stdout). */
  logger?: Logger
}

/** Starts a service for one test; it is stopped and its database dropped at the test's end. */
export async function startService(t: Test, options: StartOptions): Promise<Service> {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-test-'))
  let databaseUrl: string | null = null
  let databaseName: string | null = null
  if (options.kind === 'mysql') {
    databaseName = `kg_test_${randomBytes(6).toString('hex')}`
    const connection = await createConnection(serverOptions())
    await connection.query(`create database \`${databaseName}\` character set utf8mb4 collate utf8mb4_bin`)
    await connection.end()
    const url = new URL(mysqlServerUrl)
    url.pathname = `/${databaseName}`
    databaseUrl = url.toString()
  }
  const config = loadConfig({ port: 0, dataDir, databaseUrl, ...(options.config ?? {}) }, {})
  const service = await launch(config, options)
  t.teardown(async () => {
    await service.current.stop()
    rmSync(dataDir, { recursive: true, force: true })
    if (databaseName) {
      const connection = await createConnection(serverOptions())
      await connection.query(`drop database if exists \`${databaseName}\``)
      await connection.end()
    }
  })
  return service.current
}

async function launch(config: Config, options: StartOptions, admin?: SigningKey & { id: number }): Promise<{ current: Service }> {
  const kernel = await createKernel({ config, plugins: options.plugins, clock: options.clock, report: process.env.TEST_REPORT ? (error) => console.error('[kernel report]', error) : () => undefined, logger: options.logger ?? silentLogger() })
  const { port, url } = await kernel.listen()
  const root = kernel.createdRootKey
  const adminKey = admin ?? { id: root!.id, apiKey: root!.apiKey, secret: root!.secret }
  let stopped = false
  const holder: { current: Service } = { current: undefined as unknown as Service }
  const service: Service = {
    kind: config.databaseUrl ? 'mysql' : 'sqlite',
    kernel,
    config,
    base: url,
    port,
    admin: adminKey,
    today: (at = (options.clock ?? Date.now)()) => dayCodeAt(kernel.daySecret, at),
    async call(method, path, callOptions = {}) {
      const raw = callOptions.rawBody ?? (callOptions.body === undefined ? undefined : JSON.stringify(callOptions.body))
      const headers: Record<string, string> = { ...(callOptions.headers ?? {}) }
      if (raw !== undefined) headers['content-type'] = callOptions.contentType ?? 'application/json'
      const key = callOptions.key === undefined ? adminKey : callOptions.key
      if (key) {
        const today = callOptions.today === true ? service.today() : typeof callOptions.today === 'string' ? callOptions.today : undefined
        Object.assign(headers, signedHeaders(key, method, path, raw, { date: callOptions.date, today, hashMethod: callOptions.hashMethod }), callOptions.headers ?? {})
      }
      const response = await fetch(url + path, { method, headers, body: typeof raw === 'string' || raw === undefined ? raw : new Uint8Array(raw) })
      const text = await response.text()
      let json: unknown
      try {
        json = JSON.parse(text)
      } catch {
        json = undefined
      }
      return { status: response.status, headers: response.headers, text, json }
    },
    async restart(overrides = {}) {
      await service.stop()
      const next = await launch({ ...config, ...overrides, port: overrides.port ?? 0 }, options, adminKey)
      holder.current = next.current
      return next.current
    },
    async stop() {
      if (stopped) return
      stopped = true
      await kernel.close()
    },
  }
  holder.current = service
  return holder
}
