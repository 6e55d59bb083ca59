/** The redisUrl setting (D16): REDIS_URL, validated, its password never printed. */
import t from 'tap'
import { loadConfig, ConfigError } from '../kernel/boot/config.ts'
import { createLogger } from '../kernel/observe/logger.ts'
import { startService } from './helpers/service.ts'
import { withRedis } from './helpers/redis.ts'
import { freePort } from './helpers/freePort.ts'
import { spawn } from 'node:child_process'

t.test('redisUrl: null by default, set by REDIS_URL or the file', async (t) => {
  t.equal(loadConfig({}, {}).redisUrl, null)
  t.equal(loadConfig({}, { REDIS_URL: 'redis://:pw@cache:6379/2' }).redisUrl, 'redis://:pw@cache:6379/2')
  t.equal(loadConfig({ redisUrl: 'rediss://cache:6380/0' }, {}).redisUrl, 'rediss://cache:6380/0')
})

t.test('a bad redisUrl is a config error that never shows the password', async (t) => {
  const cases: [Record<string, string>, string][] = [
    [{ REDIS_URL: 'http://user:s3cret@cache:6379' }, 'invalid setting redisUrl: must match pattern "^rediss?://" (got "http://user:***@cache:6379")'],
    [{ REDIS_URL: 'redis://user:s3cret@cache:notaport' }, 'invalid setting redisUrl: not a valid URL (got "redis://user:***@cache:notaport")'],
    [{ REDIS_URL: 'redis://user:s3cret@cache:6379/abc' }, 'invalid setting redisUrl: the path must be a database number, e.g. /0 (got "redis://user:***@cache:6379/abc")'],
  ]
  for (const [env, message] of cases) {
    t.throws(() => loadConfig({}, env), new ConfigError(message))
    try {
      loadConfig({}, env)
    } catch (error) {
      t.notMatch((error as Error).message, /s3cret/, 'no password in the message')
    }
  }
})

t.test('a database number this Redis does not have is not used (ioredis would go on in db 0)', (t) =>
  withRedis(t, 'db 99', async (t, redisUrl) => {
    const lines: string[] = []
    const logger = createLogger({ destination: { write: (line: string) => void lines.push(line) } })
    const url = new URL(redisUrl)
    url.pathname = '/99'
    const service = await startService(t, { kind: 'sqlite', logger, config: { redisUrl: url.toString() } })
    const ready = await fetch(`http://127.0.0.1:${service.port}/readyz`)
    t.equal(ready.headers.get('keygate-degraded'), 'redis unreachable; rate limits per process', 'readiness says Redis is not in use')
    t.match(lines.join('\n'), /REDIS_URL names database 99, which this Redis does not have/, 'the log says why')
    t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200, 'the service answers, counting per process')
  }),
)

t.test('credentials Redis refuses are logged as such, not as an outage', (t) =>
  withRedis(t, 'wrong user', async (t, redisUrl) => {
    const lines: string[] = []
    const logger = createLogger({ destination: { write: (line: string) => void lines.push(line) } })
    const url = new URL(redisUrl)
    url.username = 'keygate-no-such-user'
    url.password = 'wrong'
    const service = await startService(t, { kind: 'sqlite', logger, config: { redisUrl: url.toString() } })
    const ready = await fetch(`http://127.0.0.1:${service.port}/readyz`)
    t.equal(ready.headers.get('keygate-degraded'), 'redis unreachable; rate limits per process', 'readiness says Redis is not in use')
    const said = lines.map((line) => JSON.parse(line) as { msg: string; redis?: string }).filter((line) => line.redis !== undefined)
    t.match(said.map((line) => line.msg), [/^redis refused the credentials of REDIS_URL \(WRONGPASS .*\): rate limits are counted per process/], 'said once, with why')
    t.notMatch(lines.join('\n'), /wrong/, 'never the password')
    t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200, 'the service answers, counting per process')
  }),
)

/**
 * Opens a RedisLink in a child process, as the operator CLI does, waits for its first
 * attempt and closes it: how long the start waited, whether Redis was reached, and how
 * long the process lived on after the link was closed.
 */
async function openAndClose(url: string): Promise<{ code: number | null; output: string; waited: number; reachable: string; lingered: number }> {
  const script = `
    import { RedisLink } from './kernel/cluster/redisLink.ts'
    import { RedisInvalidation } from './kernel/cluster/redisInvalidation.ts'
    import { createLogger } from './kernel/observe/logger.ts'
    const link = new RedisLink(${JSON.stringify(url)}, createLogger({ destination: { write: () => {} } }))
    const invalidation = new RedisInvalidation(link, () => {})
    const started = Date.now()
    await Promise.all([link.connected(), invalidation.start()])
    process.stdout.write('started ' + (Date.now() - started) + ' reachable ' + link.reachable + '\\n')
    await link.close()
    process.stdout.write('closed\\n')
  `
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  let output = ''
  let closedAt = 0
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString()
    if (closedAt === 0 && output.includes('closed')) closedAt = Date.now()
  })
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve))
  const lingered = closedAt === 0 ? Infinity : Date.now() - closedAt
  const [, waited, reachable] = /started (\d+) reachable (\w+)/.exec(output) ?? []
  return { code, output, waited: Number(waited), reachable, lingered }
}

t.test('a Redis that refuses connections holds neither a start nor an exit: the operator CLI does not wait 4 s more per command', async (t) => {
  // Nothing listens there: every connection attempt is refused at once (ioredis's disconnect timer held the exit 2 s).
  const { code, output, waited, reachable, lingered } = await openAndClose(`redis://127.0.0.1:${await freePort()}/0`)
  t.equal(code, 0, output)
  t.equal(reachable, 'false', 'Redis is away')
  t.ok(waited < 1000, `the start went on once the first attempt was refused (waited ${waited} ms; was the 2 s bound)`)
  t.ok(lingered < 1000, `the process exited once the link was closed (${lingered} ms later; was 2 s)`)
})

t.test('a reachable Redis does not hold the exit either: the operator CLI ends with its output', (t) =>
  withRedis(t, 'exit', async (t, redisUrl) => {
    // ioredis sent CLIENT SETINFO on connecting; a Redis before 7.2 refuses it, and a refused
    // command left its 1 s command timer running, holding every CLI run up to 1 s after its output.
    const { code, output, reachable, lingered } = await openAndClose(redisUrl)
    t.equal(code, 0, output)
    t.equal(reachable, 'true', 'Redis is reached')
    t.ok(lingered < 400, `the process exited once the link was closed (${lingered} ms later; was up to 1 s)`)
  }),
)
