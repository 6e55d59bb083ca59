import t from 'tap'
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import Database from 'better-sqlite3'
import { freePort } from './helpers/freePort.ts'
import { watchChild, workerPids } from './helpers/childService.ts'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { signedHeaders, type SigningKey } from '../kernel/auth/signature.ts'
import { mallocSettings } from '../kernel/boot/mallocSettings.ts'

t.test('WORKERS=2: limits, cache invalidation and read-your-writes hold across workers', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-cluster-'))
  const port = await freePort()
  const env = { ...process.env, DATA_DIR: dataDir, PORT: String(port), WORKERS: '2' }
  delete (env as Record<string, string | undefined>).DATABASE_URL
  for (const name of Object.keys(mallocSettings)) delete (env as Record<string, string | undefined>)[name]
  const service = spawn(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const { output, waitFor } = watchChild(t, service)
  await waitFor('2 workers')
  t.match(output.text, /listening on .*; 2 workers/)
  // Started without glibc's malloc settings (not by npm start), the primary gives them to the workers, which serve.
  const workers = workerPids(service.pid!)
  t.equal(workers.length, 2, 'two workers')
  for (const pid of workers) {
    const environment = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')
    for (const [name, value] of Object.entries(mallocSettings)) t.ok(environment.includes(`${name}=${value}`), `worker ${pid} has ${name}`)
  }

  const base = `http://127.0.0.1:${port}/v1.0`
  const stored = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
  const admin: SigningKey = { apiKey: stored.Api_Key, secret: stored.Api_Secret }
  const today = execFileSync(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', 'daycode'], { env, encoding: 'utf8' }).trim()
  // A new connection per call (no keep-alive), so calls spread over both workers.
  const call = async (key: SigningKey, method: string, path: string, body?: unknown, code?: string) => {
    const raw = body === undefined ? undefined : JSON.stringify(body)
    // Dates with milliseconds: a write repeated within one second is a new request, not a replay.
    const headers: Record<string, string> = { ...signedHeaders(key, method, path, raw, { today: code, date: new Date().toISOString() }), connection: 'close' }
    if (raw) headers['content-type'] = 'application/json'
    const response = await fetch(base + path, { method, headers, body: raw })
    return { status: response.status, headers: response.headers, json: await response.json().catch(() => null) }
  }

  const groups = (await call(admin, 'GET', '/Api/Read/Groups')).json as { Id: number; Paths: string[] }[]
  const created = await call(admin, 'POST', '/Api/Create/Key', { Display_Name: 'clustered', GroupId: groups.map((group) => group.Id), Require_Https: 0, MaxHits: '6/1Min' }, today)
  t.equal(created.status, 200)
  const key: SigningKey = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }

  const statuses = []
  for (let index = 0; index < 7; index++) statuses.push((await call(key, 'GET', '/Api/Read/Acl')).status)
  t.same(statuses, [200, 200, 200, 200, 200, 200, 429], 'six calls per minute in all, whichever worker answers')

  // One counter for 7/60Sec and 7/1Min on the primary; each worker names the window as the calling key wrote it.
  const spelled: [SigningKey, string][] = []
  for (const MaxHits of ['7/60Sec', '7/1Min']) {
    const made = await call(admin, 'POST', '/Api/Create/Key', { Display_Name: MaxHits, GroupId: groups.map((group) => group.Id), Require_Https: 0, MaxHits }, today)
    t.equal(made.status, 200)
    spelled.push([{ apiKey: made.json.Api_Key, secret: made.json.Api_Secret }, MaxHits.split('/')[1]])
  }
  const policies = new Set<string>()
  // a b b a a b b a: taking turns, each worker gets both keys, one worker each key first.
  for (const which of [0, 1, 1, 0, 0, 1, 1, 0]) {
    const [spelledKey, label] = spelled[which]
    const answer = await call(spelledKey, 'GET', '/Api/Read/Acl')
    policies.add(`${label} ${answer.headers.get('ratelimit-policy')}`)
  }
  t.same([...policies].sort(), ['1Min "1Min";q=7;w=60', '60Sec "60Sec";q=7;w=60'], 'on either worker')

  const aclBefore = (await call(admin, 'GET', '/Api/Read/Acl')).json as unknown[]
  const withoutAcl = groups.find((group) => !group.Paths.includes('/Api/Read/Acl'))!
  const aclReader = groups.find((group) => group.Paths.includes('/Api/Read/Acl'))!
  const edited = await call(admin, 'POST', '/Api/Edit/Key', { KeyId: created.json.Id, GroupId: [withoutAcl.Id], MaxHits: '' }, today)
  t.equal(edited.status, 200)
  for (let index = 0; index < 4; index++) {
    const acl = await call(key, 'GET', '/Api/Read/Acl')
    t.equal(acl.status, 403, 'the edit reached both workers at once (the ACL reader group was dropped)')
  }
  t.ok(aclBefore.length > 0)

  for (let index = 0; index < 6; index++) {
    const made = await call(admin, 'GET', '/Api/Read/Acl')
    const read = await call(admin, 'POST', '/Api/Read/Log', { LogRequestId: Number(made.headers.get('x-requestid')) })
    t.equal(read.status, 200, 'a record is readable at once, even from the other worker')
  }

  // A disable answers only once the other worker has forgotten the key. The primary relays
  // the change; it is stopped (SIGSTOP) while the edit commits, so an edit that answered
  // without waiting for the other worker would answer before the change reached it. Calls
  // already written but their last byte, on connections open to both workers (the primary
  // sees those no more), are completed the moment the edit answers: every one is refused.
  const disabled = await call(admin, 'POST', '/Api/Create/Key', { Display_Name: 'disabled at once', GroupId: [aclReader.Id], Require_Https: 0 }, today)
  t.equal(disabled.status, 200)
  const disabledKey: SigningKey = { apiKey: disabled.json.Api_Key, secret: disabled.json.Api_Secret }
  const requestText = (key: SigningKey, method: string, path: string, body = '', code?: string) => {
    const headers = { ...signedHeaders(key, method, path, body, { today: code, date: new Date().toISOString() }), host: '127.0.0.1', 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }
    return `${method} /v1.0${path} HTTP/1.1\r\n${Object.entries(headers).map(([name, value]) => `${name}: ${value}`).join('\r\n')}\r\n\r\n${body}`
  }
  // The status of the next answer on a kept-alive socket, once that answer is whole.
  const nextStatus = (socket: Socket) => new Promise<number>((resolve, reject) => {
    let text = ''
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1')
      const end = text.indexOf('\r\n\r\n')
      const length = Number(/content-length: *(\d+)/i.exec(text)?.[1] ?? 0)
      if (end < 0 || text.length < end + 4 + length) return
      socket.off('data', onData)
      resolve(Number(text.slice(9, 12)))
    }
    socket.on('data', onData).once('error', reject)
  })
  const open = () => new Promise<Socket>((resolve) => { const socket = connect(port, '127.0.0.1', () => resolve(socket)) })
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
  // Holding SQLite's write lock keeps the edit waiting inside its transaction, past every question it asks the primary.
  const file = new Database(join(dataDir, 'keygate.sqlite'))
  t.teardown(() => {
    file.close()
    // A primary left stopped by a failed assertion must not outlive the test (it has exited when all went well).
    try { process.kill(service.pid!, 'SIGCONT') } catch { /* already gone */ }
  })
  for (let round = 0; round < 3; round++) {
    const sockets = await Promise.all(Array.from({ length: 6 }, open))
    const warm = await Promise.all(sockets.map((socket) => {
      const status = nextStatus(socket)
      socket.write(requestText(disabledKey, 'GET', '/Api/Read/Acl'))
      return status
    }))
    t.same(warm, [200, 200, 200, 200, 200, 200], 'the key works on both workers, its record loaded there')
    const pending = sockets.map((socket) => {
      const text = requestText(disabledKey, 'GET', '/Api/Read/Acl')
      socket.write(text.slice(0, -1))
      return { socket, last: text.slice(-1), status: nextStatus(socket) }
    })
    const editor = await open()
    const off = nextStatus(editor)
    editor.once('data', () => { for (const { socket, last } of pending) socket.write(last) })
    file.exec('begin immediate')
    editor.write(requestText(admin, 'POST', '/Api/Edit/Key', JSON.stringify({ KeyId: disabled.json.Id, EndDate: new Date().toUTCString() }), today))
    await sleep(300)
    process.kill(service.pid!, 'SIGSTOP')
    file.exec('commit')
    // Well under the edit's 1 s bound on waiting for the other worker.
    await sleep(300)
    process.kill(service.pid!, 'SIGCONT')
    t.equal(await off, 200)
    t.same(await Promise.all(pending.map(({ status }) => status)), [401, 401, 401, 401, 401, 401], 'no call passes on either worker once the disable has answered')
    for (const socket of [...sockets, editor]) socket.destroy()
    t.equal((await call(admin, 'POST', '/Api/Edit/Key', { KeyId: disabled.json.Id, EndDate: null }, today)).status, 200)
  }

  service.kill('SIGTERM')
  const code = await new Promise((resolve) => service.once('exit', resolve))
  t.equal(code, 0, 'SIGTERM stops primary and workers cleanly')
})
