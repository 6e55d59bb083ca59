/**
 * The production start as documented (docs/deploy.md): `npm run build`, then
 * `node dist/kernel/boot/main.js` - the command the systemd unit, the Dockerfile and
 * `npm start` run (checked here against those files). SIGTERM to that PID under load:
 * exit 0 within 10 s, every answered call in api_log and in an access line on stdout.
 * SIGTERM to `npm start`'s PID reaches node too. `--version`.
 */
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import SQLite from 'better-sqlite3'
import { parse as parseYaml } from 'yaml'
import { freePort } from './helpers/freePort.ts'
import { callLoad } from './helpers/callLoad.ts'
import { watchChild } from './helpers/childService.ts'
import { mysqlServerOptions, withScratchMariadb } from './helpers/scratchDatabase.ts'
import { createConnection } from 'mysql2/promise'
import { signedHeaders } from '../kernel/auth/signature.ts'
import { mallocSettings, missingMallocSettings } from '../kernel/boot/mallocSettings.ts'

const repository = resolve(dirname(fileURLToPath(import.meta.url)), '..')
/** What follows `node`: the one production start command. */
const startArguments = ['dist/kernel/boot/main.js']
const packageJson = JSON.parse(readFileSync(join(repository, 'package.json'), 'utf8')) as { version: string; scripts: Record<string, string>; bin: Record<string, string> }

/** The service's pino lines in its output (the root key block and other plain text left out). */
function logLines(text: string): Record<string, unknown>[] {
  return text.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>)
}

t.test('the unit file, the Dockerfile and npm start run exactly the tested command', async (t) => {
  const unit = readFileSync(join(repository, 'deploy/keygate.service'), 'utf8')
  const execStart = /^ExecStart=(.+)$/m.exec(unit)![1].trim().split(/\s+/)
  t.equal(basename(execStart[0]), 'node', 'ExecStart runs node itself')
  t.ok(execStart[0].startsWith('/'), 'systemd needs an absolute path')
  t.same(execStart.slice(1), startArguments)
  t.match(unit, /^WorkingDirectory=\/opt\/keygate$/m)
  t.match(unit, /^Type=simple$/m)
  t.match(unit, /^KillSignal=SIGTERM$/m)
  t.match(unit, /^TimeoutStopSec=\d+$/m)
  for (const [name, value] of Object.entries(mallocSettings)) t.match(unit, new RegExp(`^Environment=${name}=${value}$`, 'm'), `the unit sets ${name}`)

  const dockerfile = readFileSync(join(repository, 'deploy/Dockerfile'), 'utf8')
  const cmd = /^CMD (.+)$/m.exec(dockerfile)![1]
  t.same(JSON.parse(cmd), ['node', ...startArguments], 'exec form: node is PID 1')
  t.match(dockerfile, /^USER node$/m)
  t.match(dockerfile, /^FROM node:20-slim AS build$/m)
  t.match(dockerfile, /npm ci/)
  t.match(dockerfile, /npm run build/)
  t.match(dockerfile, /\/readyz/)
  const runtimeStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '))
  for (const [name, value] of Object.entries(mallocSettings)) t.match(runtimeStage, new RegExp(`^(ENV |    )${name}=${value}\\b`, 'm'), `the image sets ${name}`)

  const compose = parseYaml(readFileSync(join(repository, 'deploy/compose.yaml'), 'utf8')) as { services: Record<string, { build?: { dockerfile: string }; healthcheck?: { test: string[] }; depends_on?: Record<string, unknown> }> }
  t.same(Object.keys(compose.services).sort(), ['keygate', 'mariadb', 'redis'])
  t.equal(compose.services.keygate.build?.dockerfile, 'deploy/Dockerfile', 'the service runs the Dockerfile CMD')
  t.match(compose.services.keygate.healthcheck?.test.join(' '), /\/readyz/)
  t.ok(compose.services.mariadb.healthcheck && compose.services.redis.healthcheck)
  t.same(Object.keys(compose.services.keygate.depends_on ?? {}).sort(), ['mariadb', 'redis'])

  const mallocDefaults = Object.entries(mallocSettings).map(([name, value]) => `${name}=\${${name}:-${value}}`).join(' ')
  t.equal(packageJson.scripts.start, `${mallocDefaults} exec node ${startArguments.join(' ')}`, 'npm start execs node (no shell left to swallow SIGTERM), with the malloc settings')
  t.equal(packageJson.bin.keygate, startArguments[0])
  t.equal(packageJson.scripts.prepare, 'node scripts/build.mjs', 'npm install / npm ci leave a fresh clone built')
  t.equal(packageJson.scripts.build, 'node scripts/build.mjs')
})

t.test("npm start's shell gives node the malloc settings, keeping an operator's own", async (t) => {
  // The start script as sh runs it, with `env` in node's place to print what node would get.
  const script = packageJson.scripts.start.replace(`exec node ${startArguments.join(' ')}`, 'exec env')
  const environment = (env: NodeJS.ProcessEnv) => {
    const run = spawnSync('sh', ['-c', script], { env, encoding: 'utf8' })
    return new Map(run.stdout.split('\n').filter(Boolean).map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]))
  }
  const plain = { PATH: process.env.PATH }
  const given = environment(plain)
  for (const [name, value] of Object.entries(mallocSettings)) t.equal(given.get(name), value, name)
  const own = environment({ ...plain, MALLOC_TRIM_THRESHOLD_: '1048576' })
  t.equal(own.get('MALLOC_TRIM_THRESHOLD_'), '1048576', "the operator's value is kept")
  t.equal(own.get('MALLOC_MMAP_THRESHOLD_'), mallocSettings.MALLOC_MMAP_THRESHOLD_, 'the other is filled in')
  t.same(missingMallocSettings({ MALLOC_TRIM_THRESHOLD_: '1' }), { MALLOC_MMAP_THRESHOLD_: mallocSettings.MALLOC_MMAP_THRESHOLD_ }, 'what a primary gives its workers')
})

t.test("the Dockerfile's build stage builds from exactly the files it copies", async (t) => {
  const dockerfile = readFileSync(join(repository, 'deploy/Dockerfile'), 'utf8')
  const buildStage = dockerfile.slice(0, dockerfile.indexOf('FROM', dockerfile.indexOf('FROM') + 1))
  const copied = [...buildStage.matchAll(/^COPY (.+) \S+$/gm)].flatMap((match) => match[1].split(/\s+/))
  t.ok(copied.includes('kernel') && copied.includes('scripts'), `the build stage copies ${copied.join(', ')}`)
  const context = mkdtempSync(join(tmpdir(), 'keygate-docker-context-'))
  t.teardown(() => rmSync(context, { recursive: true, force: true }))
  for (const path of copied) cpSync(join(repository, path), join(context, path), { recursive: true })
  // npm ci's node_modules, as the stage has them before `npm run build`.
  symlinkSync(join(repository, 'node_modules'), join(context, 'node_modules'))
  const built = spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: context, encoding: 'utf8', timeout: 180_000 })
  t.equal(built.status, 0, `npm run build in the image's context: ${built.stdout}${built.stderr}`)
  t.ok(statSync(join(context, 'dist/kernel/boot/main.js')).isFile())
  t.ok(statSync(join(context, 'dist/scripts/admin.js')).isFile(), 'the container\'s operator CLI')
})

t.test('built once; node dist/kernel/boot/main.js', async (t) => {
  const built = spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: repository, encoding: 'utf8', timeout: 120_000 })
  t.equal(built.status, 0, `npm run build: ${built.stderr}`)

  // npm start's prestart: a build only when a source is newer than the last build (after a git pull).
  t.equal(packageJson.scripts.prestart, 'node scripts/build.mjs --if-stale')
  const stamp = join(repository, 'dist', '.built')
  const builtAt = statSync(stamp).mtimeMs
  const fresh = spawnSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: repository, encoding: 'utf8', timeout: 120_000 })
  t.same([fresh.status, fresh.stderr, statSync(stamp).mtimeMs], [0, '', builtAt], 'up to date: nothing built')
  utimesSync(stamp, new Date(0), new Date(0))
  const stale = spawnSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: repository, encoding: 'utf8', timeout: 120_000 })
  t.equal(stale.status, 0, stale.stderr)
  t.match(stale.stderr, /^keygate build: the sources changed since the last build; building\n/)
  t.ok(statSync(stamp).mtimeMs > builtAt, 'stale: built again')

  t.test('--version', async (t) => {
    const version = spawnSync(process.execPath, [...startArguments, '--version'], { cwd: repository, encoding: 'utf8', timeout: 30_000 })
    t.equal(version.status, 0)
    t.equal(version.stdout, `${packageJson.version}\n`)
    t.match(readFileSync(join(repository, startArguments[0]), 'utf8'), /^#!\/usr\/bin\/env node\n/, 'the keygate bin runs with node')
  })

  t.test('a port in use: exit 1 (one process, and the primary of WORKERS=2), no node id left held', async (t) => {
    const taken = createServer()
    await new Promise<void>((done) => taken.listen(0, '127.0.0.1', done))
    t.teardown(() => new Promise<void>((done) => taken.close(() => done())))
    const port = (taken.address() as AddressInfo).port
    for (const workers of ['1', '2']) {
      const dataDir = mkdtempSync(join(tmpdir(), 'keygate-port-taken-'))
      t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
      const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(port), DATA_DIR: dataDir, PLUGINS: 'acl', WORKERS: workers }
      delete env.DATABASE_URL
      delete env.CONFIG_FILE
      const run = spawnSync(process.execPath, startArguments, { cwd: repository, env, encoding: 'utf8', timeout: 60_000 })
      t.equal(run.status, 1, `WORKERS=${workers}: exit 1, not forked again and again (${run.signal ?? ''})`)
      t.match(run.stdout + run.stderr, /EADDRINUSE/, 'the log (or the one line on stderr) names the cause')
      if (workers === '2') t.match(run.stdout, /worker \d could not start/)
      const file = new SQLite(join(dataDir, 'keygate.sqlite'), { readonly: true })
      t.same(file.prepare('select node_id from kernel_nodes').all(), [], 'the node ids are released')
      file.close()
    }
  })

  // The service's modules take a few tenths of a second to load; a signal then ended the
  // process by the signal (status 143), not with the exit 0 promised for any stop.
  t.test('SIGTERM while its modules still load: exit 0, nothing made in the data folder', async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'keygate-stop-loading-'))
    const hooks = mkdtempSync(join(tmpdir(), 'keygate-slow-load-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    t.teardown(() => rmSync(hooks, { recursive: true, force: true }))
    // A module hook holds up whatever main.js imports (a slow disk, a cold cache) and
    // says when it does, so the signal lands while the modules load, not at a guessed moment.
    const loading = join(hooks, 'loading')
    writeFileSync(join(hooks, 'hooks.mjs'), `import { writeFileSync } from 'node:fs'
export async function resolve(specifier, context, next) {
  if (context.parentURL?.endsWith('/kernel/boot/main.js')) {
    writeFileSync(${JSON.stringify(loading)}, '')
    await new Promise((done) => setTimeout(done, 1000))
  }
  return next(specifier, context)
}
`)
    writeFileSync(join(hooks, 'register.mjs'), "import { register } from 'node:module'\nregister('./hooks.mjs', import.meta.url)\n")
    const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(await freePort()), DATA_DIR: dataDir, PLUGINS: 'acl' }
    delete env.DATABASE_URL
    delete env.CONFIG_FILE
    const child = spawn(process.execPath, ['--import', join(hooks, 'register.mjs'), ...startArguments], { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
    const { output, exited } = watchChild(t, child)
    for (const since = Date.now(); !existsSync(loading); ) {
      if (child.exitCode !== null || Date.now() - since > 30_000) throw new Error(`no module load seen:\n${output.text}`)
      await new Promise((done) => setTimeout(done, 2))
    }
    child.kill('SIGTERM')
    const { code, signal } = await exited
    t.same([code, signal], [0, null], `exit 0, not killed by the signal:\n${output.text}`)
    t.match(logLines(output.text).at(-1), { msg: 'keygate stopped', signal: 'SIGTERM', pid: child.pid })
    t.same(readdirSync(dataDir), [], 'no database, no root key: the start never began')
  })

  t.test('SIGTERM while WORKERS=2 starts: the primary stops its setup and workers, exit 0, no node id held', async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'keygate-stop-starting-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    const port = await freePort()
    const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(port), DATA_DIR: dataDir, PLUGINS: 'acl,log', WORKERS: '2' }
    delete env.DATABASE_URL
    delete env.CONFIG_FILE
    const child = spawn(process.execPath, startArguments, { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
    const { output, exited } = watchChild(t, child)
    // The first start writes the root key during the primary's setup, before any worker is forked.
    const keyFile = join(dataDir, 'admin-key.json')
    for (const since = Date.now(); !existsSync(keyFile); ) {
      if (child.exitCode !== null || Date.now() - since > 60_000) throw new Error(`no setup seen:\n${output.text}`)
      await new Promise((done) => setTimeout(done, 2))
    }
    child.kill('SIGTERM')
    const { code, signal } = await exited
    t.same([code, signal], [0, null], `exit 0, not killed by the signal:\n${output.text}`)
    const lines = logLines(output.text)
    t.match(lines.at(-1), { msg: 'keygate stopped', signal: 'SIGTERM', pid: child.pid })
    t.notOk(lines.some((line) => typeof line.msg === 'string' && line.msg.startsWith('keygate listening')), 'it never began serving')
    const file = new SQLite(join(dataDir, 'keygate.sqlite'), { readonly: true })
    t.same(file.prepare('select node_id from kernel_nodes').all(), [], 'the node ids are released')
    file.close()
    const refused = await fetch(`http://127.0.0.1:${port}/healthz`).then(() => 'answered', () => 'refused')
    t.equal(refused, 'refused', 'no worker left listening')
  })

  // One process made its kernel to the end and then listened anyway: `keygate listening`
  // after the SIGTERM line, a port open after the stop began, its listen beside the close.
  t.test('SIGTERM while one process runs its migrations on a fresh MariaDB: they finish, it never listens, exit 0, the next start works', async (t) => {
    await withScratchMariadb(t, async (databaseUrl) => {
      const dataDir = mkdtempSync(join(tmpdir(), 'keygate-stop-migrating-'))
      t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
      const port = await freePort()
      const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(port), DATA_DIR: dataDir, DATABASE_URL: databaseUrl }
      delete env.CONFIG_FILE
      delete env.WORKERS
      delete env.PLUGINS
      delete env.REDIS_URL
      const database = await createConnection({ ...mysqlServerOptions(), database: new URL(databaseUrl).pathname.slice(1) })
      t.teardown(() => database.end())
      const child = spawn(process.execPath, startArguments, { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
      const { output, exited } = watchChild(t, child)
      // The kernel's migrations have begun; the plugins' (people, webhooks) are still to come.
      for (const since = Date.now(); ((await database.query("show tables like 'migrations_kernel'"))[0] as unknown[]).length === 0; ) {
        if (child.exitCode !== null || Date.now() - since > 60_000) throw new Error(`no migration seen:\n${output.text}`)
        await new Promise((done) => setTimeout(done, 5))
      }
      child.kill('SIGTERM')
      const { code, signal } = await exited
      t.same([code, signal], [0, null], `exit 0, not killed by the signal:\n${output.text}`)
      const lines = logLines(output.text)
      t.match(lines.at(-1), { msg: 'keygate stopped', signal: 'SIGTERM', pid: child.pid })
      t.notOk(lines.some((line) => typeof line.msg === 'string' && line.msg.startsWith('keygate listening')), `it never began serving:\n${output.text}`)
      t.match(output.text, /First start: created the root admin key/, 'the root key it made is still shown once')
      t.same((await database.query('select node_id from kernel_nodes'))[0], [], 'the node id is released')

      const again = spawn(process.execPath, startArguments, { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
      const next = watchChild(t, again)
      await next.waitFor('keygate listening')
      t.notMatch(next.output.text, /First start/, 'the next start finds the first one\'s root key')
      const admin = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
      const answer = await fetch(`http://127.0.0.1:${port}/v1.0/Api/Read/Acl`, { headers: signedHeaders({ apiKey: admin.Api_Key, secret: admin.Api_Secret }, 'GET', '/Api/Read/Acl') })
      t.equal(answer.status, 200, 'and serves with it')
      again.kill('SIGTERM')
      t.same(await next.exited, { code: 0, signal: null }, 'and stops with exit 0')
    })
  })

  t.test('SIGTERM to its PID under load: exit 0 within 10 s, every answered call logged', async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'keygate-production-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    const port = await freePort()
    const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(port), DATA_DIR: dataDir, PLUGINS: 'acl,log', LOG_ACCESS: 'all', NODE_ID: '5' }
    delete env.DATABASE_URL
    delete env.CONFIG_FILE
    const child = spawn(process.execPath, startArguments, { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
    const { output, exited, waitFor } = watchChild(t, child)
    await waitFor('keygate listening')
    const admin = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
    const key = { apiKey: admin.Api_Key as string, secret: admin.Api_Secret as string }
    const base = `http://127.0.0.1:${port}/v1.0`

    const load = callLoad(base, key)
    const { answeredIds } = load
    await load.answered(200)
    // Stop while the clients keep calling: the ones in flight must finish and be logged.
    const stopping = load.stop()
    child.kill('SIGTERM')
    const deadline = new Promise<'late'>((done) => setTimeout(() => done('late'), 10_000).unref())
    const ending = await Promise.race([exited, deadline])
    t.not(ending, 'late', 'exited within 10 s of SIGTERM')
    const { code, signal } = await exited
    await stopping
    t.equal(signal, null, 'not killed by the signal')
    t.equal(code, 0, 'exit code 0')

    const lines = logLines(output.text)
    t.ok(lines.some((line) => line.msg === 'keygate: SIGTERM, finishing in-flight calls and flushing the call log'))
    t.match(lines.at(-1), { level: 'info', msg: 'keygate stopped', signal: 'SIGTERM', pid: child.pid })
    const logged = new Set(lines.filter((line) => line.msg === 'call').map((line) => line.requestId as number))
    t.same(answeredIds.filter((id) => !logged.has(id)), [], `each of the ${answeredIds.length} answered calls has its access line`)
    const file = new SQLite(join(dataDir, 'keygate.sqlite'), { readonly: true })
    t.teardown(() => file.close())
    const stored = new Set((file.prepare('select id from api_log').all() as { id: number }[]).map((row) => Number(row.id)))
    t.same(answeredIds.filter((id) => !stored.has(id)), [], 'and its api_log row')
    const jsonText = output.text.split('\n').filter((line) => line.startsWith('{')).join('\n')
    t.notOk(jsonText.includes(key.secret) || jsonText.includes(key.apiKey), 'the JSON log holds no credential')
  })

  t.test('SIGTERM to the PID of npm start reaches the service: npm exits 0, node is gone', async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'keygate-npm-start-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    const port = await freePort()
    const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(port), DATA_DIR: dataDir, PLUGINS: 'acl,api' }
    delete env.DATABASE_URL
    delete env.CONFIG_FILE
    const npm = spawn('npm', ['start'], { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
    const { output, exited, waitFor } = watchChild(t, npm)
    await waitFor('keygate listening')
    // The build knows its version too (it once read dist/package.json, which is not there).
    const admin = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
    const servers = await fetch(`http://127.0.0.1:${port}/v1.0/Api/Read/Servers`, { headers: signedHeaders({ apiKey: admin.Api_Key, secret: admin.Api_Secret }, 'GET', '/Api/Read/Servers') })
    t.equal(servers.status, 200)
    t.equal((await servers.json())[0].Version, packageJson.version, 'GET /Api/Read/Servers: the version of package.json')
    const listening = output.text.split('\n').find((line) => line.includes('keygate listening'))!
    const nodePid = (JSON.parse(listening) as { pid: number }).pid
    t.not(nodePid, npm.pid, 'the service is its own process')
    npm.kill('SIGTERM')
    const { code, signal } = await exited
    t.same([code, signal], [0, null], 'npm start exits 0')
    t.match(output.text, /"msg":"keygate stopped"/)
    t.throws(() => process.kill(nodePid, 0), { code: 'ESRCH' }, 'no node process left listening')
  })
})

