/**
 * Test harness: starts a real kernel on an ephemeral port, on SQLite (a fresh temp
 * folder) or on MariaDB (a fresh database on the server named by TEST_MYSQL_URL,
 * default mysql://root@127.0.0.1:3306), and signs calls with the kernel's own code.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createScratchDatabase, mysqlProblem, mysqlRequired, mysqlServerUrl } from './scratchDatabase.ts'
import type { Test } from 'tap'
import { loadConfig, type Config } from '../../kernel/boot/config.ts'
import { createKernel, type Kernel } from '../../kernel/boot/kernel.ts'
import type { Plugin } from '../../kernel/plugin.ts'
import { signedHeaders, type HashMethod, type SigningKey } from '../../kernel/auth/signature.ts'
import { dayCodeAt } from '../../kernel/auth/dayCode.ts'
import { silentLogger, type ErrorReport, type Logger } from '../../kernel/observe/logger.ts'

export type DatabaseKind = 'sqlite' | 'mysql'

let mysqlReachable: Promise<string | null> | undefined
const mysqlProblemOnce = () => (mysqlReachable ??= mysqlProblem())

/** Runs `body` once per database as a subtest: SQLite always, MariaDB unless unreachable outside CI. */
export async function forEachDatabase(t: Test, body: (t: Test, kind: DatabaseKind) => Promise<void>): Promise<void> {
  await t.test('sqlite', (t) => body(t, 'sqlite'))
  const problem = await mysqlProblemOnce()
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
  /** Where the kernel reports unexpected errors; default nowhere (TEST_REPORT: stderr). */
  report?: ErrorReport
}

/** Starts a service for one test; it is stopped and its database dropped at the test's end. */
export async function startService(t: Test, options: StartOptions): Promise<Service> {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-test-'))
  const scratch = options.kind === 'mysql' ? await createScratchDatabase() : null
  const databaseUrl = scratch?.url ?? null
  const config = loadConfig({ port: 0, dataDir, databaseUrl, ...(options.config ?? {}) }, {})
  const service = await launch(config, options).catch(async (error) => {
    // A start the test expects to fail leaves no folder or database behind.
    rmSync(dataDir, { recursive: true, force: true })
    await scratch?.drop()
    throw error
  })
  t.teardown(async () => {
    await service.current.stop()
    rmSync(dataDir, { recursive: true, force: true })
    await scratch?.drop()
  })
  return service.current
}

/** `usedSignatures`: the signatures this service was sent, kept across restarts (the service remembers them in its database). */
async function launch(
  config: Config,
  options: StartOptions,
  admin?: SigningKey & { id: number },
  usedSignatures = new Set<string>(),
  // Shared by a service and every restart of it, so the test's teardown stops the latest one.
  holder: { current: Service } = { current: undefined as unknown as Service },
): Promise<{ current: Service }> {
  const kernel = await createKernel({ config, plugins: options.plugins, clock: options.clock, report: options.report ?? (process.env.TEST_REPORT ? (error) => console.error('[kernel report]', error) : () => undefined), logger: options.logger ?? silentLogger() })
  const { port, url } = await kernel.listen()
  const root = kernel.createdRootKey
  const adminKey = admin ?? { id: root!.id, apiKey: root!.apiKey, secret: root!.secret }
  let stopped = false
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
        const signing = { date: callOptions.date, today, hashMethod: callOptions.hashMethod }
        let signed = signedHeaders(key, method, path, raw, signing)
        // A write signed once is sent once (replays are refused): like a careful client,
        // sign a second identical call within the same second with a date to the millisecond.
        while (callOptions.date === undefined && usedSignatures.has(signed['x-apihmac'])) {
          signed = signedHeaders(key, method, path, raw, { ...signing, date: new Date().toISOString() })
        }
        usedSignatures.add(signed['x-apihmac'])
        Object.assign(headers, signed, callOptions.headers ?? {})
      }
      const response = await fetch(url + path, { method, headers, body: typeof raw === 'string' || raw === undefined ? raw : new Uint8Array(raw) })
      return readAnswer(response)
    },
    async restart(overrides = {}) {
      await service.stop()
      return (await launch({ ...config, ...overrides, port: overrides.port ?? 0 }, options, adminKey, usedSignatures, holder)).current
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

/** A fetch answer as the tests read it: status, headers, text, and the JSON when the text is JSON. */
export async function readAnswer(response: Response): Promise<{ status: number; headers: Headers; text: string; json: any }> {
  const text = await response.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, headers: response.headers, text, json }
}
