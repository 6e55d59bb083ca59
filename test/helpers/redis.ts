/**
 * Redis for tests (D16): the local server at TEST_REDIS_URL (default
 * redis://127.0.0.1:6379/0), each test under its own key prefix (ioredis keyPrefix in
 * the URL) so tests never collide, and only that prefix is deleted afterwards. In CI a
 * Redis that cannot be reached fails the run; elsewhere the tests report skipped.
 */
import { randomBytes } from 'node:crypto'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import type { Test } from 'tap'

export const redisServerUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379/0'
const redisRequired = process.env.CI === 'true' || process.env.REQUIRE_REDIS === '1'

/** null when the server answers PING, else why not. */
export async function redisProblem(url = redisServerUrl): Promise<string | null> {
  const client = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 })
  client.on('error', () => {})
  try {
    await client.connect()
    await client.ping()
    return null
  } catch (error) {
    return (error as Error).message || String(error)
  } finally {
    client.disconnect()
  }
}

/** Runs `body` with a fresh REDIS_URL (own key prefix) when Redis answers; skips (or fails in CI) when not. */
export async function withRedis(t: Test, name: string, body: (t: Test, redisUrl: string) => Promise<void>): Promise<void> {
  const problem = await redisProblem()
  if (problem && !redisRequired) {
    await t.test(name, { skip: `Redis at ${redisServerUrl} is not reachable (${problem}); CI requires it` }, async () => {})
    return
  }
  if (problem) {
    t.fail(`Redis at ${redisServerUrl} is required here (CI) but not reachable: ${problem}`)
    return
  }
  const prefix = `kgtest-${randomBytes(5).toString('hex')}:`
  await t.test(name, async (t) => {
    t.teardown(() => dropPrefix(prefix))
    await body(t, `${redisServerUrl}?keyPrefix=${prefix}`)
  })
}

async function dropPrefix(prefix: string): Promise<void> {
  const client = new Redis(redisServerUrl, { maxRetriesPerRequest: 0 })
  client.on('error', () => {})
  try {
    let cursor = '0'
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500)
      cursor = next
      if (keys.length > 0) await client.del(...keys)
    } while (cursor !== '0')
  } finally {
    client.disconnect()
  }
}

/** A private redis-server on its own port and temp dir (never the shared one), for outage tests. */
export interface PrivateRedis {
  url: string
  stop(): Promise<void>
  start(): Promise<void>
  /** SIGSTOP: the sockets stay open and nothing is answered (a hung Redis); resume() is SIGCONT. */
  pause(): void
  resume(): void
}

export async function privateRedis(t: Test, port: number, startNow = true): Promise<PrivateRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-redis-'))
  let child: ChildProcess | null = null
  const url = `redis://127.0.0.1:${port}/0`
  const handle: PrivateRedis = {
    url,
    async start() {
      child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' })
      for (let waited = 0; (await redisProblem(url)) !== null; waited += 100) {
        if (waited > 10_000) throw new Error('private redis-server did not start')
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    },
    pause() {
      child?.kill('SIGSTOP')
    },
    resume() {
      child?.kill('SIGCONT')
    },
    async stop() {
      const running = child
      child = null
      if (!running || running.exitCode !== null || running.signalCode !== null) return
      running.kill('SIGKILL')
      await new Promise((resolve) => running.once('exit', resolve))
    },
  }
  t.teardown(async () => {
    await handle.stop()
    rmSync(dir, { recursive: true, force: true })
  })
  if (startNow) await handle.start()
  return handle
}
