/**
 * SIGTERM of the real process (`node --import tsx kernel/boot/main.ts`) under load: it exits
 * 0 and every call that got an answer has its row in api_log. A call answered while the
 * service drains closes its connection (Connection: close) instead of holding the stop.
 */
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import SQLite from 'better-sqlite3'
import { connect, type Socket } from 'node:net'
import { execFileSync, spawnSync } from 'node:child_process'
import { createConnection } from 'mysql2/promise'
import { mysqlServerOptions, withScratchMariadb } from './helpers/scratchDatabase.ts'
import { withRedis } from './helpers/redis.ts'
import { freePort } from './helpers/freePort.ts'
import { startService } from './helpers/service.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'
import { callLoad } from './helpers/callLoad.ts'

const repository = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** The real service (`node --import tsx kernel/boot/main.ts`), as `npm start` runs it: on SQLite unless `extraEnv` names a DATABASE_URL. */
async function spawnService(t: Test, extraEnv: NodeJS.ProcessEnv = {}, dataDir = mkdtempSync(join(tmpdir(), 'keygate-shutdown-')), port?: number) {
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  port ??= await freePort()
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'CONFIG_FILE', 'WORKERS']) delete env[name]
  Object.assign(env, { HOST: '127.0.0.1', PORT: String(port), DATA_DIR: dataDir, PLUGINS: 'acl,log', NODE_ID: '3' }, extraEnv)
  const child = spawn(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
  const state = { output: '' }
  child.stdout.on('data', (chunk) => (state.output += chunk))
  child.stderr.on('data', (chunk) => (state.output += chunk))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.once('exit', (code, signal) => done({ code, signal })))
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGCONT')
      child.kill('SIGKILL')
    }
  })

  const started = Date.now()
  while (!state.output.includes('keygate listening')) {
    if (child.exitCode !== null || Date.now() - started > 60_000) throw new Error(`the service did not start:\n${state.output}`)
    await new Promise((done) => setTimeout(done, 50))
  }
  const admin = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
  const key = { apiKey: admin.Api_Key as string, secret: admin.Api_Secret as string }
  return { child, exited, state, port, dataDir, key, env }
}

t.test('SIGTERM under load: exit 0, no answered call without its record', async (t) => {
  const { child, exited, state, port, dataDir, key } = await spawnService(t)
  const output = () => state.output
  const base = `http://127.0.0.1:${port}/v1.0`

  const load = callLoad(base, key, { headers: { 'x-LogLevel': '2' } })
  const { answeredIds } = load
  await load.answered(100)
  // Stop while the clients keep calling: the ones in flight must finish and be logged.
  const stopping = load.stop()
  child.kill('SIGTERM')
  const { code, signal } = await exited
  await stopping
  t.equal(signal, null, 'not killed by the signal')
  t.equal(code, 0, 'exit code 0')
  t.match(output(), /SIGTERM, finishing in-flight calls and flushing the call log/)

  const file = new SQLite(join(dataDir, 'keygate.sqlite'), { readonly: true })
  t.teardown(() => file.close())
  const stored = new Set((file.prepare('select id from api_log').all() as { id: number }[]).map((row) => Number(row.id)))
  const missing = answeredIds.filter((id) => !stored.has(id))
  t.ok(answeredIds.length >= 100, `${answeredIds.length} calls answered`)
  t.same(missing, [], 'every answered call has its log row')
})

t.test('SIGTERM: calls sent before it are answered, also those the process had not yet taken up (listen backlog, unread bytes)', async (t) => {
  const { child, exited, port, key } = await spawnService(t)
  const connectTo = () => new Promise<Socket>((done) => {
    const socket = connect(port, '127.0.0.1', () => done(socket))
    socket.setEncoding('utf8')
    socket.on('error', () => undefined)
  })
  const request = () => {
    const lines = Object.entries(signedHeaders(key, 'GET', '/Api/Read/Acl')).map(([name, value]) => `${name}: ${value}`)
    return ['GET /v1.0/Api/Read/Acl HTTP/1.1', 'Host: 127.0.0.1', ...lines, '', ''].join('\r\n')
  }
  const answer = (socket: Socket) => new Promise<string>((done) => {
    let text = ''
    socket.on('data', (chunk: string) => (text += chunk))
    socket.once('close', () => done(text))
  })
  // Accepted by the service, then it stops running (an event loop far behind, as under load).
  const accepted = await Promise.all([0, 1, 2].map(connectTo))
  await new Promise((done) => setTimeout(done, 300))
  child.kill('SIGSTOP')
  // These wait in the listen backlog: the kernel completed the handshake, the service never saw them.
  const waiting = await Promise.all([0, 1, 2].map(connectTo))
  const answers = [...accepted, ...waiting].map((socket) => {
    const answered = answer(socket)
    socket.write(request())
    return answered
  })
  await new Promise((done) => setTimeout(done, 200))
  child.kill('SIGTERM')
  await new Promise((done) => setTimeout(done, 100))
  child.kill('SIGCONT')
  const texts = await Promise.all(answers)
  for (const [index, text] of texts.entries()) {
    t.match(text, /^HTTP\/1\.1 200 /, `call ${index + 1} of 6 (${index < 3 ? 'accepted' : 'in the backlog'}) was answered, not reset`)
  }
  const { code } = await exited
  t.equal(code, 0, 'exit code 0')
})

// Node takes up one waiting connection per event-loop turn, and with WORKERS the primary
// hands them over one at a time: the stop once took up 20 turns' worth and reset the rest.
for (const workers of [1, 2]) {
  t.test(`SIGTERM with 40 calls waiting in the listen backlog${workers > 1 ? ` (WORKERS=${workers})` : ''}: every one answered`, async (t) => {
    const { child, exited, port, key } = await spawnService(t, workers > 1 ? { WORKERS: String(workers) } : {})
    // The primary and its workers: all of them stop, as a process whose event loop runs far behind.
    const processes = [child.pid!, ...spawnSync('pgrep', ['-P', String(child.pid)], { encoding: 'utf8' }).stdout.split(/\s+/).filter(Boolean).map(Number)]
    t.equal(processes.length, workers > 1 ? workers + 1 : 1, 'the processes of the service')
    for (const pid of processes) process.kill(pid, 'SIGSTOP')
    const waiting = await Promise.all(Array.from({ length: 40 }, () => new Promise<Socket>((done) => {
      const socket = connect(port, '127.0.0.1', () => done(socket))
      socket.setEncoding('utf8')
      socket.on('error', () => undefined)
    })))
    const answers = waiting.map((socket) => {
      const answered = new Promise<string>((done) => {
        let text = ''
        socket.on('data', (chunk: string) => (text += chunk))
        socket.once('close', () => done(text))
      })
      const lines = Object.entries(signedHeaders(key, 'GET', '/Api/Read/Acl')).map(([name, value]) => `${name}: ${value}`)
      socket.write(['GET /v1.0/Api/Read/Acl HTTP/1.1', 'Host: 127.0.0.1', ...lines, '', ''].join('\r\n'))
      return answered
    })
    await new Promise((done) => setTimeout(done, 200))
    child.kill('SIGTERM')
    await new Promise((done) => setTimeout(done, 100))
    for (const pid of processes) process.kill(pid, 'SIGCONT')
    const texts = await Promise.all(answers)
    const unanswered = texts.map((text, index) => (/^HTTP\/1\.1 200 /.test(text) ? null : index + 1)).filter((index) => index !== null)
    t.same(unanswered, [], 'each of the 40 calls sent before SIGTERM was answered 200, none reset')
    const { code } = await exited
    t.equal(code, 0, 'exit code 0')
  })
}

t.test('a call answered while the service drains gets Connection: close and its connection ends at once', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const body = '{}'
  const headers = signedHeaders(service.admin, 'POST', '/Api/Read/Acl', body)
  const socket = connect(service.port, '127.0.0.1')
  let text = ''
  let answeredAt = 0
  socket.setEncoding('utf8')
  socket.on('data', (chunk) => {
    answeredAt ||= Date.now()
    text += chunk
  })
  const ended = new Promise<number>((done) => socket.once('close', () => done(Date.now())))
  await new Promise<void>((done) => socket.once('connect', () => done()))
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}`)
  // The headers now, the body after the drain began: the call is in flight when close() starts.
  socket.write(['POST /v1.0/Api/Read/Acl HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/json', `Content-Length: ${body.length}`, ...lines, '', ''].join('\r\n'))
  await new Promise((done) => setTimeout(done, 200))
  const closing = service.kernel.close()
  await new Promise((done) => setTimeout(done, 100))
  socket.write(body)
  const closedAt = await ended
  t.match(text, /^HTTP\/1\.1 200 /, 'answered')
  t.match(text, /\r\nconnection: close\r\n/i, 'with Connection: close')
  t.ok(closedAt - answeredAt < 1000, 'the connection ended with the answer, not after the keep-alive time')
  await closing
})

t.test('a connection taken up as the stop begins, its request still on the way, is answered rather than reset', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const socket = connect(service.port, '127.0.0.1')
  let text = ''
  socket.setEncoding('utf8')
  socket.on('data', (chunk) => (text += chunk))
  socket.on('error', () => undefined)
  const ended = new Promise<void>((done) => socket.once('close', () => done()))
  await new Promise<void>((done) => socket.once('connect', () => done()))
  await new Promise((done) => setTimeout(done, 100))
  const closing = service.kernel.close()
  // Its client (busy, as under load) writes the call a moment after the connection was accepted.
  await new Promise((done) => setTimeout(done, 30))
  const lines = Object.entries(signedHeaders(service.admin, 'GET', '/Api/Read/Acl')).map(([name, value]) => `${name}: ${value}`)
  socket.write(['GET /v1.0/Api/Read/Acl HTTP/1.1', 'Host: 127.0.0.1', ...lines, '', ''].join('\r\n'))
  await ended
  t.match(text, /^HTTP\/1\.1 200 /, 'answered')
  t.match(text, /\r\nconnection: close\r\n/i, 'with Connection: close')
  await closing
})

t.test('a connection with no call in flight does not hold the stop: a silent one, one with half its headers', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const silent = connect(service.port, '127.0.0.1')
  const halfway = connect(service.port, '127.0.0.1')
  for (const socket of [silent, halfway]) socket.on('error', () => undefined)
  await Promise.all([silent, halfway].map((socket) => new Promise<void>((done) => socket.once('connect', () => done()))))
  halfway.write('GET /v1.0/Api/Read/Acl HTTP/1.1\r\nHost: 127.0.0.1\r\n')
  await new Promise((done) => setTimeout(done, 100))
  const started = Date.now()
  await service.kernel.close()
  t.ok(Date.now() - started < 3000, `closed in ${Date.now() - started} ms, not after timeouts.requestMs`)
  t.ok(silent.destroyed || silent.readableEnded || (await new Promise((done) => silent.once('close', () => done(true)))), 'the silent connection was ended')
})

// The same stop on MariaDB and Redis, one process and WORKERS=2, with writes in flight
// beside the reads, and a second SIGTERM while it stops (a supervisor or an impatient
// operator repeating it): the stop goes on as the first began it.
for (const workers of [1, 2]) {
  t.test(`MariaDB and Redis${workers > 1 ? `, WORKERS=${workers}` : ''}: SIGTERM twice under reads (log levels 0 and 2), key creates and people writes`, async (t) => {
    await withScratchMariadb(t, async (databaseUrl) => {
      await withRedis(t, 'redis', async (t, redisUrl) => {
        const serverEnv = { DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, PLUGINS: 'keys,acl,log,people', WORKERS: String(workers) }
        const { child, exited, port, dataDir, key, env } = await spawnService(t, serverEnv)
        const database = await createConnection({ ...mysqlServerOptions(), database: new URL(databaseUrl).pathname.slice(1) })
        t.teardown(() => database.end())
        const today = execFileSync(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', 'daycode'], { cwd: repository, env, encoding: 'utf8' }).trim()
        const base = `http://127.0.0.1:${port}/v1.0`
        type Answered = { kind: string; status: number; id: string | null; json: { Id?: number } | null }
        const answered: Answered[] = []
        let stopping = false
        const call = async (kind: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}, code?: string) => {
          const raw = body === undefined ? undefined : JSON.stringify(body)
          // Dates with milliseconds: two writes alike within a second are two requests, not a replay.
          const signed = signedHeaders(key, method, path, raw, { today: code, date: new Date().toISOString() })
          const response = await fetch(base + path, { method, body: raw, headers: { ...signed, ...headers, ...(raw ? { 'content-type': 'application/json' } : {}) } })
          const text = await response.text()
          answered.push({ kind, status: response.status, id: response.headers.get('x-requestid'), json: response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : null })
        }
        const loop = async (each: (turn: number) => Promise<void>) => {
          for (let turn = 0; ; turn++) {
            try {
              await each(turn)
            } catch {
              if (stopping) return // no longer accepted: never answered
            }
          }
        }
        const loops = [
          ...Array.from({ length: 4 }, () => loop((turn) => call('read', 'GET', '/Api/Read/Acl', undefined, { 'x-LogLevel': String((turn % 2) * 2) }))),
          ...Array.from({ length: 2 }, () => loop((turn) => call('create', 'POST', '/Api/Create/Key', { Display_Name: `k${turn}`, GroupId: '3,4', Require_Https: 0 }, { 'x-LogLevel': '2' }, today))),
          ...Array.from({ length: 2 }, () => loop((turn) => call('person', 'POST', '/People/Update/OneChange', { FirstName: 'Stop', LastName: `Test ${turn}` }))),
        ]
        while (answered.filter((call) => call.kind === 'create').length < 10 || answered.length < 150) await new Promise((done) => setTimeout(done, 10))
        stopping = true
        child.kill('SIGTERM')
        await new Promise((done) => setTimeout(done, 30))
        if (child.exitCode === null) child.kill('SIGTERM')
        const { code, signal } = await exited
        await Promise.all(loops)
        t.same([code, signal], [0, null], 'exit 0, not killed by either signal')
        t.same(answered.filter((call) => call.status >= 500).map((call) => `${call.kind} ${call.status}`), [], 'no 5xx')

        const logged = new Set(((await database.query('select id from api_log'))[0] as { id: number | string }[]).map((row) => String(row.id)))
        t.same(answered.filter((call) => call.id === null || !logged.has(call.id)).map((call) => `${call.kind} ${call.id}`), [], `each of the ${answered.length} answered calls has its call-log row`)
        const createdIds = answered.filter((call) => call.kind === 'create' && call.status === 200).map((call) => Number(call.json?.Id))
        const groupCounts = new Map(((await database.query('select key_id, count(*) as n from api_key_groups group by key_id'))[0] as { key_id: number; n: number }[]).map((row) => [Number(row.key_id), Number(row.n)]))
        t.same(createdIds.filter((id) => groupCounts.get(id) !== 2), [], 'every key created is there with both its groups')
        t.same((await database.query('select k.id from api_keys k left join api_key_groups g on g.key_id = k.id where g.key_id is null'))[0], [], 'no key without its groups (half written)')
        const people = new Set(((await database.query('select id from people'))[0] as { id: number }[]).map((row) => Number(row.id)))
        t.same(answered.filter((call) => call.kind === 'person' && call.status === 200 && !people.has(Number(call.json?.Id))).length, 0, 'every person added is there')
        t.same((await database.query('select node_id from kernel_nodes'))[0], [], 'the node ids are released')

        // The next start serves, and finds the last calls' records by the key that made them.
        const next = await spawnService(t, serverEnv, dataDir, port)
        const last = answered.filter((call) => call.status === 200).slice(-10)
        for (const call of last) {
          const body = JSON.stringify({ LogRequestId: call.id })
          const read = await fetch(`${base}/Api/Read/Log`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...signedHeaders(key, 'POST', '/Api/Read/Log', body) } })
          t.equal(read.status, 200, `the record of ${call.kind} ${call.id} reads back after the restart`)
        }
        next.child.kill('SIGTERM')
        t.same(await next.exited, { code: 0, signal: null }, 'the next start stops with exit 0 too')
      })
    })
  })
}
