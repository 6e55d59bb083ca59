/**
 * The service log (pino JSON lines): access lines by `log.access`, nothing secret ever
 * in it, and config errors that name the setting without printing a secret value.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { forEachDatabase, startService } from './helpers/service.ts'
import { groupNamed } from './helpers/keys.ts'
import { createLogger, errorReporter } from '../kernel/observe/logger.ts'
import { isStoreOutage } from '../kernel/storage/database.ts'
import { defineRoute, type Plugin } from '../kernel/sdk.ts'
import { loadConfig, ConfigError, type Config } from '../kernel/boot/config.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'

function capture() {
  const lines: string[] = []
  const logger = createLogger({ destination: { write: (line: string) => void lines.push(line) } })
  return { lines, logger, parsed: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>) }
}

const logSection = (access: 'all' | 'errors' | 'none'): Config['log'] => ({ detailDays: 7, recordDays: 30, batchSize: 500, flushMs: 50, queueMax: 20000, purgeEveryMs: 60000, purgeBatch: 1000, access })

t.test('access lines: all, errors (the default), none', async (t) => {
  await forEachDatabase(t, async (t, kind) => {
    const all = capture()
    const service = await startService(t, { kind, logger: all.logger, config: { log: logSection('all') } })
    const ok = await service.call('GET', '/Api/Read/Acl')
    const refused = await service.call('GET', '/Api/Read/Acl', { key: { ...service.admin, secret: 'wrong' } })
    t.equal(refused.status, 401)
    const [first, second] = all.parsed()
    t.match(first, { level: 'info', msg: 'call', requestId: Number(ok.headers.get('x-requestid')), method: 'GET', route: '/Api/Read/Acl', plugin: 'acl', status: 200, remoteAddr: '127.0.0.1', keyId: service.admin.id, service: 'keygate' })
    t.type(first.ms, 'number')
    t.type(first.time, 'string')
    t.match(second, { level: 'warn', msg: 'call refused', requestId: null, status: 401, keyId: null, error: 'Error: Signature (x-apihmac) does not match.' })
    t.equal(all.lines.length, 2)

    const errors = capture()
    const quiet = await startService(t, { kind, logger: errors.logger })
    t.equal(quiet.config.log.access, 'errors', 'errors is the default')
    t.equal((await quiet.call('GET', '/Api/Read/Acl')).status, 200)
    t.equal((await quiet.call('GET', '/Api/Read/Acl', { key: null })).status, 401)
    const unrouted = await quiet.call('GET', '/Api/Read/Nothing?token=never-logged')
    t.equal(unrouted.status, 404)
    t.same(errors.parsed().map((line) => [line.status, line.msg]), [[401, 'call refused'], [404, 'call refused']], 'a 404 is a 4xx too')
    t.match(errors.parsed()[1], { requestId: null, method: 'GET', route: '(no route)', plugin: '', keyId: null, error: 'Error: Not found.' })
    t.notOk(errors.lines.join('\n').includes('never-logged'), 'never the raw URL')

    const none = capture()
    const silent = await startService(t, { kind, logger: none.logger, config: { log: logSection('none') } })
    await silent.call('GET', '/Api/Read/Acl')
    await silent.call('GET', '/Api/Read/Acl', { key: null })
    t.same(none.lines, [])
  })
})

t.test('no secret, signature, day code or credential reaches the log', async (t) => {
  const log = capture()
  const service = await startService(t, { kind: 'sqlite', logger: log.logger, config: { log: logSection('all') } })
  const today = service.today()
  const group = await groupNamed(service, 'Access list reader')
  const created = await service.call('POST', '/Api/Create/Key', { today: true, headers: { 'x-LogLevel': '2' }, body: { Display_Name: 'logged key', GroupId: group } })
  t.equal(created.status, 200, created.text)
  const newSecret = created.json.Api_Secret as string
  t.ok(newSecret, 'the answer carries a new secret')
  const headers = signedHeaders(service.admin, 'GET', '/Api/Read/Acl')
  await service.call('GET', '/Api/Read/Acl', { headers: { 'x-LogLevel': '2' } })
  await service.call('GET', '/Api/Read/Acl', { key: { ...service.admin, secret: 'wrong' }, today: '12345678' })
  // The kernel's report path: an error object with SQL text and a config with secrets.
  log.logger.error({ err: Object.assign(new Error('insert failed'), { code: 'ER_DUP_ENTRY', sql: `insert into api_keys values ('${service.admin.secret}')` }) }, 'unexpected error')
  log.logger.info({ headers: { authorization: `x-apihmac ${headers['x-apihmac']}`, 'x-apikey': service.admin.apiKey, 'x-apitoday': today, cookie: 'session=1' }, config: { masterKey: 'ab'.repeat(32), databaseUrl: 'mysql://u:hunter2@db/k' } }, 'a request')
  log.logger.error({ err: Object.assign(new TypeError('Invalid URL'), { code: 'ERR_INVALID_URL', input: 'mysql://u:hunter2@[x' }) }, 'could not start')
  const text = log.lines.join('')
  t.ok(log.lines.length >= 5)
  for (const secret of [service.admin.secret, service.admin.apiKey, newSecret, created.json.Api_Key, headers['x-apihmac'], today, '12345678', 'ab'.repeat(32), 'hunter2', 'session=1']) {
    t.notOk(text.includes(secret), `never printed: ${secret.slice(0, 4)}...`)
  }
  t.match(text, /"sql":"\[redacted\]"/)
  t.match(text, /"masterKey":"\[redacted\]"/)
})

t.test('config errors name the setting and print no secret', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'keygate-config-secrets-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  const masterKey = 'c0ffee'.repeat(10) + 'c0ff'
  const password = 'pa55-w0rd-9f8e'
  const typo = join(folder, 'typo.json')
  writeFileSync(typo, JSON.stringify({ masterKey, databaseUrl: `mysql://keygate:${password}@db:3306/keygate`, prot: 8080 }))
  const messageOf = (env: NodeJS.ProcessEnv): string => {
    try {
      loadConfig({}, env)
    } catch (error) {
      t.ok(error instanceof ConfigError)
      return (error as Error).message
    }
    throw new Error('no config error')
  }
  t.equal(messageOf({ CONFIG_FILE: typo }), "invalid setting config: unknown setting 'prot'", 'the typo is named, the merged config is not printed')
  t.equal(messageOf({ MASTER_KEY: 'not-a-hex-key-but-secret' }), 'invalid setting masterKey: must match pattern "^([0-9a-fA-F]{64}|.*/.*)$"', 'a bad MASTER_KEY is named, not echoed')
  t.equal(messageOf({ DATABASE_URL: `postgres://keygate:${password}@db/keygate` }), 'invalid setting databaseUrl: must match pattern "^mysql://" (got "postgres://keygate:***@db/keygate")', 'the password in a URL is masked')
  t.equal(messageOf({ DATABASE_URL: `mysql://keygate:${password}@[db/keygate` }), 'invalid setting databaseUrl: not a valid URL (got "mysql://keygate:***@[db/keygate")', 'an unparsable URL: masked too')
  // No '://', or an '@' inside the password: nothing of the password shows.
  t.equal(messageOf({ DATABASE_URL: `mysql//keygate:${password}@db/keygate` }), 'invalid setting databaseUrl: must match pattern "^mysql://" (got "mysql:***@db/keygate")', 'a URL without its ://')
  t.equal(messageOf({ DATABASE_URL: `mysql://keygate:${password}@x@db:99999/keygate` }), 'invalid setting databaseUrl: not a valid URL (got "mysql://keygate:***@db:99999/keygate")', "a password with an unencoded '@'")
  t.equal(messageOf({ DATABASE_URL: `mysql://keygate:${password}` }), 'invalid setting databaseUrl: not a valid URL (got "mysql://keygate:***")', "the '@host' forgotten: what follows the colon may be the password")
  t.equal(messageOf({ LOG_ACCESS: 'verbose' }), 'invalid setting log.access: must be equal to one of the allowed values (got "verbose")')
  t.equal(messageOf({ METRICS_PORT: '99999' }), 'invalid setting metrics.port: must be <= 65535 (got 99999)')
  const broken = join(folder, 'broken.json')
  writeFileSync(broken, `{ "masterKey": "${masterKey}" x }`)
  t.match(messageOf({ CONFIG_FILE: broken }), /^config file .*broken\.json: not valid JSON \(at character \d+\)$/)
  const unexpected = join(folder, 'unexpected.json')
  writeFileSync(unexpected, `{ "masterKey": ${masterKey} }`)
  t.notMatch(messageOf({ CONFIG_FILE: unexpected }), masterKey.slice(0, 8), 'a JSON error quoting the file is not passed on')

  // The real start: one plain line on stderr, nothing on stdout, no secret anywhere.
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], {
    env: { ...process.env, CONFIG_FILE: typo, MASTER_KEY: masterKey, DATABASE_URL: `mysql://keygate:${password}@db:3306/keygate` },
    encoding: 'utf8',
    timeout: 30_000,
  })
  t.equal(result.status, 1)
  t.equal(result.stdout, '')
  t.equal(result.stderr, "keygate: invalid setting config: unknown setting 'prot'\n")
  for (const secret of [masterKey, password]) t.notOk((result.stdout + result.stderr).includes(secret))
})

t.test('errors are error lines; a database outage is one warning per interval, not one per call', async (t) => {
  const log = capture()
  const outage = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:3306'), { code: 'ECONNREFUSED' })
  const report = errorReporter(log.logger, (error) => error === outage, 60_000)
  report(new Error('a bug'))
  for (let index = 0; index < 50; index++) report(outage)
  const lines = log.parsed()
  t.equal(lines.length, 2)
  t.match(lines[0], { level: 'error', msg: 'unexpected error', err: { message: 'a bug', type: 'Error' } })
  t.match(lines[1], { level: 'warn', msg: 'database unavailable', repeated: 0, err: { code: 'ECONNREFUSED' } })
})

t.test('an unexpected error line names its call: request id, method and route (log.access none)', async (t) => {
  const failing: Plugin = {
    name: 'failing',
    defaultGroups: [{ name: 'Failing', paths: [{ path: '/Failing/Read/Boom', displayName: 'throws' }] }],
    setup: () => [defineRoute({ method: 'GET', path: '/Failing/Read/Boom', xml: { root: 'Boom' }, handler: () => { throw new Error('a bug in a plugin') } })],
  }
  await forEachDatabase(t, async (t, kind) => {
    const log = capture()
    const service = await startService(t, { kind, plugins: [failing], logger: log.logger, report: errorReporter(log.logger, isStoreOutage), config: { log: logSection('none') } })
    const boom = await service.call('GET', '/Failing/Read/Boom')
    t.equal(boom.status, 500)
    t.equal(boom.text, 'Error: Internal error.')
    const requestId = Number(boom.headers.get('x-requestid'))
    t.ok(requestId > 0, 'the caller got a request id')
    const errors = log.parsed().filter((line) => line.msg === 'unexpected error')
    t.equal(errors.length, 1)
    t.match(errors[0], { level: 'error', requestId, method: 'GET', route: '/Failing/Read/Boom', err: { message: 'a bug in a plugin' } })
  })
})

t.test('a start that fails on a setting (port in use, host, data folder, master key file or database unusable) is one plain line naming it', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'keygate-start-failure-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  const busy = createServer()
  await new Promise<void>((done) => busy.listen(0, '127.0.0.1', done))
  t.teardown(() => busy.close())
  const password = 'pa55-w0rd-7c6d'
  const start = (env: NodeJS.ProcessEnv) => spawnSync(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], {
    env: { ...process.env, DATA_DIR: mkdtempSync(join(folder, 'data-')), MASTER_KEY: 'ab'.repeat(32), PORT: '0', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  })
  const port = (busy.address() as AddressInfo).port
  const aFile = join(folder, 'a-file')
  writeFileSync(aFile, '')
  const cases: [NodeJS.ProcessEnv, string][] = [
    [{ PORT: String(port) }, `keygate: invalid setting host or port: cannot listen on 127.0.0.1:${port} (EADDRINUSE)\n`],
    [{ METRICS_PORT: String(port) }, `keygate: invalid setting metrics.port: cannot listen on 127.0.0.1:${port} (EADDRINUSE)\n`],
    [{ METRICS_PORT: String(port), WORKERS: '2' }, `keygate: invalid setting metrics.port: cannot listen on 127.0.0.1:${port} (EADDRINUSE)\n`],
    [{ HOST: 'no-such-host.invalid' }, "keygate: invalid setting host: 'no-such-host.invalid' does not resolve (ENOTFOUND)\n"],
    [{ DATABASE_URL: `mysql://keygate:${password}@127.0.0.1:1/keygate` }, 'keygate: the database of databaseUrl mysql://keygate:***@127.0.0.1:1/keygate does not answer (is it running?): connect ECONNREFUSED 127.0.0.1:1\n'],
    [{ METRICS_HOST: 'no-such-host.invalid', METRICS_PORT: String(port) }, "keygate: invalid setting metrics.host: 'no-such-host.invalid' does not resolve (ENOTFOUND)\n"],
    [{ MASTER_KEY: folder }, `keygate: invalid setting masterKey: master key file ${folder} cannot be read (EISDIR)\n`],
    [{ DATA_DIR: aFile }, `keygate: invalid setting dataDir: cannot use ${aFile}: ENOTDIR: not a directory, mkdir '${aFile}'\n`],
    [{ DATA_DIR: join(aFile, 'data') }, `keygate: invalid setting dataDir: cannot use ${join(aFile, 'data')}: ENOTDIR: not a directory, stat '${join(aFile, 'data')}'\n`],
    // Node's own recursive mkdir loops forever here (mkdir answers ENOENT under a folder that exists).
    ...(existsSync('/proc/self') ? [[{ DATA_DIR: '/proc/keygate-data' }, "keygate: invalid setting dataDir: cannot use /proc/keygate-data: ENOENT: no such file or directory, mkdir '/proc/keygate-data'\n"] as [NodeJS.ProcessEnv, string]] : []),
  ]
  for (const [env, line] of cases) {
    const result = start(env)
    t.equal(result.status, 1, JSON.stringify(env))
    t.equal(result.stderr, line, 'one plain line, no stack')
    t.notMatch(result.stdout, /"level":"fatal"|\n\s+at /, 'no fatal line with a stack')
    t.notOk((result.stdout + result.stderr).includes(password), 'the password is not printed')
  }
  // With WORKERS the port is taken by each worker through the primary (a 'bind' error):
  // the same plain line (once per worker that got that far), and the service exits 1.
  const workers = start({ PORT: String(port), WORKERS: '2' })
  t.equal(workers.status, 1)
  const lines = workers.stderr.split('\n').filter((line) => line !== '')
  t.ok(lines.length >= 1, workers.stderr)
  for (const line of lines) t.equal(line, `keygate: invalid setting host or port: cannot listen on 127.0.0.1:${port} (EADDRINUSE)`)
  t.notMatch(workers.stdout, /\n\s+at |"stack"/, 'no stack')
})
