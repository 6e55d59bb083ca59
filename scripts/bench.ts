/**
 * `npm run bench`: autocannon against the real service (a child process on a fresh data
 * folder; MySQL when DATABASE_URL is set) and, in the same run, against a bare node:http
 * server answering a small JSON body, so every figure is also a ratio to that ceiling.
 *
 * Environment: BENCH_SECONDS (10), BENCH_CONNECTIONS (50), BENCH_PEOPLE (100000),
 * BENCH_KEYS (1000000), BENCH_ONLY (comma-separated scenario names: acl, acl-log2, log,
 * create, people, people-uncached, people-goals, keys, three-redis; people-goals imports its own people, so run it alone), BENCH_REDIS_URL (for three-redis; default
 * the local Redis under a key prefix of its own), BENCH_OUT (bench-results/latest.json),
 * BENCH_SERVICE_NODE_OPTIONS (node flags for the service process only), BENCH_SERVICE_NODE_ARGS
 * (flags NODE_OPTIONS refuses, e.g. `--cpu-prof --cpu-prof-dir=prof`). Every request is signed (the signature is reused
 * within one second, as a real client may).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir, totalmem } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import { freePort } from '../test/helpers/freePort.ts'
import { signedHeaders, type SigningKey } from '../kernel/auth/signature.ts'
import { openDatabase } from '../kernel/storage/database.ts'
import { loadMasterKey, SecretBox } from '../kernel/auth/secrets.ts'
import { newKeyCredentials } from '../kernel/auth/keyIssuer.ts'
import { dayCodeAt } from '../kernel/auth/dayCode.ts'
import { loadDaySecret } from '../kernel/boot/bootstrap.ts'
import { peopleGoals } from './bench/people.ts'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const seconds = Number(process.env.BENCH_SECONDS ?? 10)
const connections = Number(process.env.BENCH_CONNECTIONS ?? 50)
const peopleCount = Number(process.env.BENCH_PEOPLE ?? 100_000)
const keyCount = Number(process.env.BENCH_KEYS ?? 1_000_000)
const only = process.env.BENCH_ONLY?.split(',').map((name) => name.trim())
const outFile = process.env.BENCH_OUT ?? join(root, 'bench-results', 'latest.json')
const databaseUrl = process.env.DATABASE_URL ?? null
// The `three-redis` scenario (D16): Redis for three processes, under a key prefix of its own.
const benchRedisUrl = process.env.BENCH_REDIS_URL ?? `redis://127.0.0.1:6379/0?keyPrefix=keygate-bench-${process.pid}:`

interface Row {
  scenario: string
  requestsPerSecond: number
  p50: number
  p99: number
  ratioToBare: number | null
  non2xx: number
  errors: number
  note?: string
}

function waitForLine(child: ChildProcess, pattern: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = ''
    const onData = (chunk: Buffer) => {
      seen += chunk
      if (pattern.test(seen)) {
        child.stdout!.off('data', onData)
        resolve()
      }
    }
    child.stdout!.on('data', onData)
    child.once('exit', (code) => reject(new Error(`process exited (${code}) before it was ready:\n${seen}`)))
  })
}

const bareServerSource = `
const http = require('node:http')
const body = JSON.stringify({ ok: true, service: 'bare node:http' })
http.createServer((request, response) => {
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
  response.end(body)
}).listen(Number(process.env.PORT), '127.0.0.1', () => console.log('ready'))
`

async function startBare(): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort()
  const child = spawn(process.execPath, ['-e', bareServerSource], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'inherit'] })
  await waitForLine(child, /ready/)
  return { url: `http://127.0.0.1:${port}/`, child }
}

async function startService(dataDir: string, extraEnv: Record<string, string> = {}): Promise<{ base: string; child: ChildProcess; port: number }> {
  const port = await freePort()
  const env: Record<string, string> = { ...(process.env as Record<string, string>), PORT: String(port), DATA_DIR: dataDir, BODY_LIMIT: String(16 * 1024 * 1024), ...extraEnv }
  if (databaseUrl) env.DATABASE_URL = databaseUrl
  // Node flags for the service alone (e.g. --max-old-space-size=256), not for autocannon.
  if (process.env.BENCH_SERVICE_NODE_OPTIONS) env.NODE_OPTIONS = process.env.BENCH_SERVICE_NODE_OPTIONS
  // Flags NODE_OPTIONS refuses (--cpu-prof, --cpu-prof-dir=...) go on the command line.
  const nodeArguments = (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean)
  const child = spawn(process.execPath, [...nodeArguments, '--import', 'tsx', join(root, 'kernel/boot/main.ts')], { env, stdio: ['ignore', 'pipe', 'inherit'], cwd: root })
  await waitForLine(child, /listening on/)
  return { base: `http://127.0.0.1:${port}/v1.0`, child, port }
}

function rssMegabytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024
}

/** A signed call outside the load (setup). */
async function call(base: string, key: SigningKey, method: string, path: string, body?: unknown, today?: string): Promise<{ status: number; json: any; headers: Headers }> {
  const raw = body === undefined ? undefined : JSON.stringify(body)
  const headers: Record<string, string> = signedHeaders(key, method, path, raw, { today })
  if (raw) headers['content-type'] = 'application/json'
  const response = await fetch(base + path, { method, headers, body: raw })
  const text = await response.text()
  let json: unknown = text
  try {
    json = JSON.parse(text)
  } catch {
    // plain text errors stay text
  }
  if (response.status >= 400) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return { status: response.status, json, headers: response.headers }
}

interface Load {
  method: 'GET' | 'POST'
  path: string
  /** Called per request: the key and body to use. */
  next?: () => { key: SigningKey; body?: string; today?: string }
  key?: SigningKey
  body?: string
  headers?: Record<string, string>
}

async function measure(url: string | string[], load: Load, limits: { seconds?: number; amount?: number } = {}): Promise<autocannon.Result> {
  let second = -1
  let signed: Record<string, string> = {}
  const requests = [{
    method: load.method,
    setupRequest(request: any) {
      if (load.next) {
        const { key, body, today } = load.next()
        request.headers = { ...load.headers, ...signedHeaders(key, load.method, load.path, body, { today }), ...(body ? { 'content-type': 'application/json' } : {}) }
        request.body = body
        return request
      }
      const now = Math.floor(Date.now() / 1000)
      if (now !== second) {
        second = now
        signed = { ...load.headers, ...signedHeaders(load.key!, load.method, load.path, load.body), ...(load.body ? { 'content-type': 'application/json' } : {}) }
      }
      request.headers = signed
      request.body = load.body
      return request
    },
  }]
  return autocannon({ url: url as string, connections, duration: limits.seconds ?? seconds, amount: limits.amount, requests })
}

function summarise(scenario: string, result: autocannon.Result, bare: number | null, note?: string): Row {
  const row: Row = {
    scenario,
    requestsPerSecond: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    ratioToBare: bare ? Math.round((result.requests.average / bare) * 100) / 100 : null,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    note,
  }
  console.log(`  ${scenario}: ${row.requestsPerSecond} req/s, p50 ${row.p50} ms, p99 ${row.p99} ms, ratio ${row.ratioToBare ?? '-'}, non-2xx ${row.non2xx}${note ? `, ${note}` : ''}`)
  return row
}

async function seedPeople(base: string, admin: SigningKey): Promise<void> {
  const { json: started } = await call(base, admin, 'POST', '/people/update/importinit', {})
  for (let offset = 0; offset < peopleCount; offset += 10_000) {
    const people: Record<string, unknown>[] = []
    for (let index = offset; index < Math.min(peopleCount, offset + 10_000); index++) {
      people.push({ Source_Id: `B${index}`, Emp_Id: String(index), FirstName: `First${index % 5003}`, LastName: `Last${(index * 7919) % 20011}`, Dept: 'Bench', Photo: index % 10 === 0 ? `https://photos.example/${index}.jpg` : null })
    }
    await call(base, admin, 'POST', '/people/update/importmass', { ImportId: started.ImportId, People: people })
  }
  await call(base, admin, 'POST', '/people/update/importterm', { ImportId: started.ImportId })
}

/** Inserts `count` keys straight into the store (an HTTP create per key would take an hour). */
async function seedKeys(dataDir: string, count: number, groupIds: number[]): Promise<SigningKey[]> {
  const database = openDatabase({ databaseUrl, dataDir })
  const box = new SecretBox(loadMasterKey(null, dataDir))
  const keys: SigningKey[] = []
  const now = Date.now()
  const batch = 2000
  for (let offset = 0; offset < count; offset += batch) {
    const rows: { api_key: string; secret_enc: string; display_name: string; parent: number; custno: number; require_https: number; max_hits: string; created_at: number; updated_at: number }[] = []
    for (let index = offset; index < Math.min(count, offset + batch); index++) {
      const credentials = newKeyCredentials()
      keys.push({ apiKey: credentials.apiKey, secret: credentials.secret })
      rows.push({ api_key: credentials.apiKey, secret_enc: box.seal(credentials.secret, credentials.apiKey), display_name: `bench ${index}`, parent: 1000, custno: 0, require_https: 0, max_hits: '1000/1Sec', created_at: now, updated_at: now })
    }
    await database.db.transaction().execute(async (trx) => {
      await trx.insertInto('api_keys').values(rows).execute()
      const ids = await trx.selectFrom('api_keys').select('id').where('api_key', 'in', rows.map((row) => row.api_key)).execute()
      await trx.insertInto('api_key_groups').values(ids.flatMap((row) => groupIds.map((groupId) => ({ key_id: Number(row.id), group_id: groupId })))).execute()
    })
    if (offset % 100_000 === 0) process.stdout.write(`  seeded ${offset} keys\r`)
  }
  await database.close()
  return keys
}

async function main(): Promise<void> {
  const wanted = (name: string) => !only || only.includes(name)
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-bench-'))
  const rows: Row[] = []
  const children: ChildProcess[] = []
  const stopAll = () => children.forEach((child) => child.exitCode === null && child.kill('SIGTERM'))
  process.on('exit', stopAll)
  try {
    console.log(`keygate benchmark: ${seconds}s per scenario, ${connections} connections, ${databaseUrl ? 'MySQL' : 'SQLite'}; ${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB`)
    const bare = await startBare()
    children.push(bare.child)
    const service = await startService(dataDir)
    children.push(service.child)
    const stored = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
    const admin: SigningKey = { apiKey: stored.Api_Key, secret: stored.Api_Secret }
    const daySecretDatabase = openDatabase({ databaseUrl, dataDir })
    const daySecret = await loadDaySecret(daySecretDatabase.db, new SecretBox(loadMasterKey(null, dataDir)))
    await daySecretDatabase.close()
    const today = () => dayCodeAt(daySecret, Date.now())

    // A rate-limited key at LogLevel 0 holding every group the admin may assign.
    const { json: groups } = await call(service.base, admin, 'GET', '/Api/Read/Groups')
    const groupIds: number[] = groups.map((group: { Id: number }) => group.Id)
    const { json: created } = await call(service.base, admin, 'POST', '/Api/Create/Key', {
      Display_Name: 'bench reader', GroupId: groupIds, Require_Https: 0, LogLevel: 0, MaxHits: '1000000/1Sec,100000000/1Hour',
    }, today())
    const reader: SigningKey = { apiKey: created.Api_Key, secret: created.Api_Secret }

    console.log('\nceiling')
    // The bare server gets the very same signed requests, so the client's own work per
    // request is identical in both measurements and the ratio compares servers only.
    const bareResult = await measure(bare.url, { method: 'GET', path: '/Api/Read/Acl', key: reader })
    const bareRate = bareResult.requests.average
    rows.push(summarise('bare node:http', bareResult, bareRate))

    console.log('\nscenarios')
    if (wanted('acl')) {
      rows.push(summarise('GET /Api/Read/Acl (signed, ACL, rate limit, log level 0, cached)', await measure(service.base + '/Api/Read/Acl', { method: 'GET', path: '/Api/Read/Acl', key: reader }), bareRate))
    }
    if (wanted('acl-log2')) {
      rows.push(summarise('GET /Api/Read/Acl at x-LogLevel 2', await measure(service.base + '/Api/Read/Acl', { method: 'GET', path: '/Api/Read/Acl', key: reader, headers: { 'x-loglevel': '2' } }), bareRate))
    }
    if (wanted('log')) {
      const logged = await call(service.base, reader, 'GET', '/Api/Read/Acl')
      const body = JSON.stringify({ LogRequestId: Number(logged.headers.get('x-requestid')) })
      rows.push(summarise('POST /Api/Read/Log', await measure(service.base + '/Api/Read/Log', { method: 'POST', path: '/Api/Read/Log', key: reader, body }), bareRate))
    }
    if (wanted('create')) {
      let counter = 0
      rows.push(summarise('POST /Api/Create/Key', await measure(service.base + '/Api/Create/Key', {
        method: 'POST', path: '/Api/Create/Key',
        next: () => ({ key: admin, today: today(), body: JSON.stringify({ Display_Name: `bench ${process.pid} ${counter++}`, GroupId: groupIds[0], Require_Https: 0 }) }),
      }), bareRate))
    }
    if (wanted('people') || wanted('people-uncached')) {
      const started = Date.now()
      await seedPeople(service.base, admin)
      console.log(`  (imported ${peopleCount} people in ${((Date.now() - started) / 1000).toFixed(1)} s)`)
      const path = '/People/Read/Missing?page=2&size=100'
      if (wanted('people')) {
        rows.push(summarise(`GET /People/Read/Missing over ${peopleCount} people, cached`, await measure(service.base + path, { method: 'GET', path, key: reader }), bareRate))
      }
      if (wanted('people-uncached')) {
        // A second process on the same data with the response cache off.
        const uncached = await startService(dataDir, { CACHE_RESPONSES: 'false' })
        children.push(uncached.child)
        rows.push(summarise(`GET /People/Read/Missing over ${peopleCount} people, uncached`, await measure(uncached.base + path, { method: 'GET', path, key: reader }), bareRate))
        uncached.child.kill('SIGTERM')
      }
    }
    if (wanted('people-goals')) {
      rows.push(...await peopleGoals({
        base: service.base, servicePid: service.child.pid!, admin, reader, database: databaseUrl ? 'mysql' : 'sqlite', peopleCount, call, measure,
        startService: async (extraEnv) => {
          const started = await startService(dataDir, extraEnv)
          children.push(started.child)
          return started
        },
      }))
    }
    if (wanted('keys')) {
      const started = Date.now()
      const aclGroups = groupIds.slice(0, 1)
      const keys = await seedKeys(dataDir, keyCount, aclGroups)
      console.log(`  (seeded ${keyCount} keys in ${((Date.now() - started) / 1000).toFixed(1)} s)`)
      let next = 0
      // Every key calls once (each call a key not seen before: a store lookup, then cached
      // in the bounded LRU), so memory is measured after all of them have been in use.
      const result = await measure(service.base + '/Api/Read/Acl', {
        method: 'GET', path: '/Api/Read/Acl',
        next: () => ({ key: keys[next++ % keys.length] }),
      }, { amount: keys.length, seconds: Number(process.env.BENCH_KEYS_SECONDS ?? 900) })
      rows.push(summarise(`GET /Api/Read/Acl, each call a different one of ${keyCount} keys`, result, bareRate,
        `${Math.min(next, keys.length)} distinct keys called, service RSS ${Math.round(rssMegabytes(service.child.pid!))} MB`))
    }
    if (wanted('three-redis')) {
      // Three processes on the same database and one Redis, the client spreading its
      // connections round-robin over their ports; next to one process on the same Redis.
      if (!databaseUrl) {
        console.log('  three-redis: skipped (needs DATABASE_URL, MySQL/MariaDB shared by the processes)')
      } else {
        const path = '/Api/Read/Acl'
        const nodes = []
        for (let index = 0; index < 3; index++) {
          const node = await startService(dataDir, { REDIS_URL: benchRedisUrl })
          children.push(node.child)
          nodes.push(node)
        }
        rows.push(summarise('GET /Api/Read/Acl, one process with Redis limits', await measure(nodes[0].base + path, { method: 'GET', path, key: reader }), bareRate))
        rows.push(summarise('GET /Api/Read/Acl, three processes on MariaDB + Redis (round-robin)', await measure(nodes.map((node) => node.base + path), { method: 'GET', path, key: reader }), bareRate))
        for (const node of nodes) node.child.kill('SIGTERM')
      }
    }
    rows.push({ scenario: 'service RSS at the end (MB)', requestsPerSecond: Math.round(rssMegabytes(service.child.pid!)), p50: 0, p99: 0, ratioToBare: null, non2xx: 0, errors: 0 })

    console.log('\n| scenario | req/s | p50 ms | p99 ms | ratio to bare | non-2xx |')
    console.log('|---|---:|---:|---:|---:|---:|')
    for (const row of rows) console.log(`| ${row.scenario}${row.note ? ` (${row.note})` : ''} | ${row.requestsPerSecond} | ${row.p50} | ${row.p99} | ${row.ratioToBare ?? ''} | ${row.non2xx} |`)
    mkdirSync(dirname(outFile), { recursive: true })
    writeFileSync(outFile, JSON.stringify({ date: new Date().toISOString(), seconds, connections, database: databaseUrl ? 'mysql' : 'sqlite', cpu: cpus()[0]?.model, cores: cpus().length, rows }, null, 2))
    console.log(`\nwritten to ${outFile}`)
  } finally {
    stopAll()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(`bench: ${(error as Error).message}`)
  process.exitCode = 1
})
