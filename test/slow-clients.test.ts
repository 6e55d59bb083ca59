import t from 'tap'
import { connect, type Socket } from 'node:net'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startService } from './helpers/service.ts'
import { probePlugin } from './helpers/probePlugin.ts'
import type { Plugin } from '../kernel/plugin.ts'
import { freePort } from './helpers/freePort.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'
import SQLite from 'better-sqlite3'
import { createLogger } from '../kernel/observe/logger.ts'
import { loadConfig } from '../kernel/boot/config.ts'

/** Resolves with the ms until the server closed the socket, and what it sent. */
function closedAfter(socket: Socket): Promise<{ ms: number; data: string }> {
  const started = Date.now()
  let data = ''
  socket.on('data', (chunk) => (data += chunk))
  return new Promise((resolve) => socket.on('close', () => resolve({ ms: Date.now() - started, data })))
}

t.test('slow and abusive clients are cut off; others are still served', async (t) => {
  const service = await startService(t, {
    kind: 'sqlite',
    plugins: [probePlugin],
    config: { timeouts: { headersMs: 1000, requestMs: 2000, keepAliveMs: 1000, maxHeaderSize: 16384 } },
  })

  await t.test('headers trickled (slowloris)', async (t) => {
    const socket = connect(service.port, '127.0.0.1')
    socket.on('error', () => undefined)
    socket.write('GET /v1.0/Probe/Echo HTTP/1.1\r\nHost: x\r\n')
    const timer = setInterval(() => socket.writable && socket.write('X-Slow: 1\r\n'), 200)
    const { ms, data } = await closedAfter(socket)
    clearInterval(timer)
    t.ok(ms < 4000, `closed after ${ms} ms`)
    t.match(data, /^(HTTP\/1\.1 408|$)/)
  })

  await t.test('a client that never reads nor closes is let go after its 408', async (t) => {
    const socket = connect(service.port, '127.0.0.1')
    const failed = new Promise<string>((resolve) => socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error')))
    socket.pause()
    socket.write('GET /v1.0/Probe/Echo HTTP/1.1\r\nHost: x\r\n')
    // headersMs (1 s, checked each second) plus the second its 408 may be read in.
    await new Promise((resolve) => setTimeout(resolve, 4500))
    // A socket the server still holds takes these bytes in silence; a closed one resets.
    const timer = setInterval(() => socket.write('X-Late: 1\r\n'), 100)
    const code = await Promise.race([failed, new Promise<string>((resolve) => setTimeout(() => resolve('still open'), 3000))])
    clearInterval(timer)
    socket.destroy()
    t.match(code, /^(ECONNRESET|EPIPE)$/, 'the server has closed the connection')
  })

  await t.test('a body trickled forever', async (t) => {
    const socket = connect(service.port, '127.0.0.1')
    socket.on('error', () => undefined)
    socket.write('POST /v1.0/Probe/Body HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{')
    const timer = setInterval(() => socket.writable && socket.write(' '), 200)
    const { ms } = await closedAfter(socket)
    clearInterval(timer)
    t.ok(ms < 6000, `closed after ${ms} ms`)
  })

  await t.test('an oversized header block', async (t) => {
    const socket = connect(service.port, '127.0.0.1')
    socket.on('error', () => undefined)
    socket.write(`GET /v1.0/Probe/Echo HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(32 * 1024)}\r\n\r\n`)
    const { data } = await closedAfter(socket)
    t.match(data, /^HTTP\/1\.1 431 /)
  })

  await t.test('many idle keep-alive connections', async (t) => {
    const sockets = await Promise.all(Array.from({ length: 500 }, () => new Promise<Socket>((resolve) => {
      const socket = connect(service.port, '127.0.0.1', () => resolve(socket))
      socket.on('error', () => undefined)
    })))
    t.equal((await service.call('GET', '/Probe/Echo')).status, 200, 'answers while 500 sockets idle')
    const closed = await Promise.all(sockets.map((socket) => closedAfter(socket)))
    t.ok(closed.every(({ ms }) => ms < 5000), 'idle sockets are closed by the server')
  })

  t.equal((await service.call('GET', '/Probe/Echo')).status, 200, 'still answering')
})

t.test('a signed body cut off or timed out is the client\'s doing: 400 or 408 in the access line, never an outage', async (t) => {
  const lines: string[] = []
  const logger = createLogger({ destination: { write: (line: string) => void lines.push(line) } })
  const service = await startService(t, {
    kind: 'sqlite',
    plugins: [probePlugin],
    logger,
    config: { timeouts: { headersMs: 1000, requestMs: 2000, keepAliveMs: 1000, maxHeaderSize: 16384 }, log: { ...loadConfig({}, {}).log, access: 'all' } },
  })
  const body = '{"Name":"x"}'
  const send = (destroyAfterMs: number | null) => {
    const headers = signedHeaders(service.admin, 'POST', '/Probe/Body', body)
    const socket = connect(service.port, '127.0.0.1')
    socket.on('error', () => undefined)
    socket.write(`POST /v1.0/Probe/Body HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n${Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n${body}`)
    if (destroyAfterMs !== null) setTimeout(() => socket.destroy(), destroyAfterMs)
    return closedAfter(socket)
  }
  const accessLines = () => lines.map((line) => JSON.parse(line)).filter((line) => line.route === '/Probe/Body')
  await send(300)
  const { data } = await send(null)
  t.match(data, /^HTTP\/1\.1 408 /, 'a body that never completes is cut off with 408')
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.same(accessLines().map((line) => line.status), [400, 408], 'a client that hung up is a 400, one cut off a 408')
  t.notOk(lines.some((line) => /database unavailable|"status":503/.test(line)), 'no outage is reported')
})

/** A plugin whose one route, GET /Slow, answers only when the test calls release(). */
function gatedPlugin(): { slowPlugin: Plugin; release: () => void } {
  let release: () => void = () => undefined
  const gate = new Promise<void>((resolve) => (release = resolve))
  const slowPlugin: Plugin = {
    name: 'slow',
    defaultGroups: [{ name: 'Slow', paths: [{ path: '/Slow', displayName: 'slow' }] }],
    setup: () => [{ method: 'GET', path: '/Slow', xml: { root: 'Slow' }, handler: async () => { await gate; return { Done: 1 } } }],
  }
  return { slowPlugin, release }
}

t.test('close() finishes in-flight calls, then stops', async (t) => {
  const { slowPlugin, release } = gatedPlugin()
  const service = await startService(t, { kind: 'sqlite', plugins: [slowPlugin] })
  const inFlight = service.call('GET', '/Slow')
  await new Promise((resolve) => setTimeout(resolve, 100))
  const closing = service.stop()
  await new Promise((resolve) => setTimeout(resolve, 100))
  await fetch(`${service.base}/Slow`).then(
    () => t.fail('a new connection after close() must be refused'),
    () => t.pass('new connections are refused while closing'),
  )
  release()
  const answer = await inFlight
  t.equal(answer.status, 200, 'the in-flight call got its answer')
  t.same(answer.json, { Done: 1 })
  await closing
})

t.test('10,000 idle keep-alive connections (service in its own process)', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-idle-'))
  const port = await freePort()
  const child = spawn(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], {
    env: { ...process.env, DATA_DIR: dataDir, PORT: String(port), DATABASE_URL: '' },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
    rmSync(dataDir, { recursive: true, force: true })
  })
  await new Promise<void>((resolve) => child.stdout!.on('data', (chunk) => String(chunk).includes('listening on') && resolve()))
  const stored = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
  const key = { apiKey: stored.Api_Key, secret: stored.Api_Secret }

  const sockets: Socket[] = []
  for (let batch = 0; batch < 20; batch++) {
    sockets.push(...(await Promise.all(Array.from({ length: 500 }, () => new Promise<Socket>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => resolve(socket))
      socket.on('error', () => resolve(socket))
    })))))
  }
  t.equal(sockets.length, 10_000)
  const started = Date.now()
  const answer = await fetch(`http://127.0.0.1:${port}/v1.0/Api/Read/Acl`, { headers: signedHeaders(key, 'GET', '/Api/Read/Acl') })
  t.equal(answer.status, 200, `a signed call is answered in ${Date.now() - started} ms while 10,000 sockets idle`)
  const closed = await Promise.all(sockets.map((socket) => (socket.destroyed ? { ms: 0, data: '' } : closedAfter(socket))))
  t.ok(closed.every(({ ms }) => ms < 15_000), 'the server closes idle sockets by itself (headersTimeout)')
  child.kill('SIGTERM')
  t.equal(await new Promise((resolve) => child.once('exit', resolve)), 0)
})

t.test('close() waits for a call whose client has gone, and keeps its record', async (t) => {
  const { slowPlugin, release } = gatedPlugin()
  const service = await startService(t, { kind: 'sqlite', plugins: [slowPlugin] })
  const abort = new AbortController()
  const gone = fetch(`${service.base}/Slow`, { headers: signedHeaders(service.admin, 'GET', '/Slow'), signal: abort.signal }).catch(() => 'aborted')
  await new Promise((resolve) => setTimeout(resolve, 100))
  abort.abort()
  t.equal(await gone, 'aborted')
  const closing = service.stop()
  await new Promise((resolve) => setTimeout(resolve, 200))
  release()
  await closing
  const file = new SQLite(join(service.config.dataDir, 'keygate.sqlite'), { readonly: true })
  const row = file.prepare("select count(*) as calls from api_log where api_function = '/Slow'").get() as { calls: number }
  file.close()
  t.equal(row.calls, 1, 'the abandoned call still has its log record')
})
