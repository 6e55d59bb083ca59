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
import { spawnSync } from 'node:child_process'
import { freePort } from './helpers/freePort.ts'
import { startService } from './helpers/service.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'
import { callLoad } from './helpers/callLoad.ts'

const repository = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** The real service (`node --import tsx kernel/boot/main.ts`) on SQLite, as `npm start` runs it. */
async function spawnService(t: Test, extraEnv: NodeJS.ProcessEnv = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-shutdown-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const port = await freePort()
  const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(port), DATA_DIR: dataDir, PLUGINS: 'acl,log', NODE_ID: '3', ...extraEnv }
  delete env.DATABASE_URL
  delete env.CONFIG_FILE
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
  return { child, exited, state, port, dataDir, key }
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
