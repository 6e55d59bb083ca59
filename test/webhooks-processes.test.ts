/**
 * Issue 17 with real processes: a service SIGKILLed between a change and its delivery
 * delivers it after the restart; two processes on one MariaDB never both deliver one
 * event (each webhook-id arrives once).
 */
import t, { type Test } from 'tap'
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './helpers/freePort.ts'
import { watchChild } from './helpers/childService.ts'
import { withScratchMariadb } from './helpers/scratchDatabase.ts'
import { signedHeaders, type SigningKey } from '../kernel/auth/signature.ts'
import { startReceiver } from './helpers/webhookReceiver.ts'

interface Cluster {
  start(pollMs: number): Promise<{ port: number; kill(): Promise<void> }>
  call(port: number, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }>
  /** The environment the processes run with (for an operator CLI run on the same database). */
  env: Record<string, string | undefined>
}

async function cluster(t: Test, databaseUrl: string | null): Promise<Cluster> {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-webhooks-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const base: Record<string, string | undefined> = { ...process.env, DATA_DIR: dataDir, WEBHOOKS_ALLOW_HTTP: 'true', WEBHOOKS_ALLOW_ADDRESSES: '127.0.0.1', WEBHOOKS_FIRST_RETRY_MS: '100' }
  if (databaseUrl) base.DATABASE_URL = databaseUrl
  else delete base.DATABASE_URL
  let today = ''
  let admin: SigningKey
  return {
    env: base,
    async start(pollMs) {
      const port = await freePort()
      const child = spawn(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env: { ...base, PORT: String(port), WEBHOOKS_POLL_MS: String(pollMs) }, stdio: ['ignore', 'pipe', 'pipe'] })
      const watched = watchChild(t, child)
      await watched.waitFor('listening')
      if (!today) {
        const stored = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
        admin = { apiKey: stored.Api_Key, secret: stored.Api_Secret }
        today = execFileSync(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', 'daycode'], { env: base, encoding: 'utf8' }).trim()
      }
      return { port, kill: async () => { child.kill('SIGKILL'); await watched.exited } }
    },
    async call(port, method, path, body) {
      const raw = body === undefined ? undefined : JSON.stringify(body)
      const headers: Record<string, string> = signedHeaders(admin, method, path, raw, { today, date: new Date().toISOString() })
      if (raw) headers['content-type'] = 'application/json'
      const response = await fetch(`http://127.0.0.1:${port}/v1.0${path}`, { method, headers, body: raw })
      const text = await response.text()
      return { status: response.status, json: text.startsWith('Error') ? text : JSON.parse(text) }
    },
  }
}

/** A service polling once an hour (so it does not send), a webhook, and one key.changed delivery pending. */
async function pendingDelivery(t: Test, databaseUrl: string | null, name: string) {
  const receiver = await startReceiver(t)
  const service = await cluster(t, databaseUrl)
  const first = await service.start(3_600_000)
  t.equal((await service.call(first.port, 'POST', '/Api/Create/Webhook', { Url: receiver.url, Events: ['key.changed'] })).status, 200)
  const groups = (await service.call(first.port, 'GET', '/Api/Read/Groups')).json as { Id: number }[]
  const key = await service.call(first.port, 'POST', '/Api/Create/Key', { Display_Name: name, GroupId: groups[0].Id, Require_Https: 0 })
  t.equal((await service.call(first.port, 'POST', '/Api/Edit/Key', { KeyId: key.json.Id, Phone: '1' })).status, 200)
  return { receiver, service, first, key }
}

async function killedBeforeDelivery(t: Test, databaseUrl: string | null) {
  // This process never gets to send.
  const { receiver, service, first, key } = await pendingDelivery(t, databaseUrl, 'Crash')
  await first.kill()
  t.equal(receiver.attempts, 0, 'not sent before the crash')
  const second = await service.start(50)
  const [delivered] = await receiver.waitFor(1)
  t.match(delivered.json, { type: 'key.changed', data: { KeyId: key.json.Id, Changed: ['Phone'] } })
  const deliveries = (await service.call(second.port, 'POST', '/Api/Read/Deliveries', {})).json
  t.match(deliveries, { Total: 1, Deliveries: [{ Id: delivered.id, Status: 'delivered' }] })
  await second.kill()
}

async function cliNeverSends(t: Test, databaseUrl: string | null) {
  // The service does not send while the CLI runs.
  const { receiver, service, first } = await pendingDelivery(t, databaseUrl, 'Cli')
  // An operator command that opens the kernel, with a poll far shorter than its run: its kernel
  // serves nothing, so it must not claim the pending delivery (and cut the send short as it exits).
  execFileSync(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', 'export'], { env: { ...service.env, WEBHOOKS_POLL_MS: '10' }, stdio: ['ignore', 'ignore', 'pipe'] })
  await new Promise((done) => setTimeout(done, 300))
  t.equal(receiver.attempts, 0, 'the CLI sent nothing')
  const deliveries = (await service.call(first.port, 'POST', '/Api/Read/Deliveries', {})).json
  t.match(deliveries, { Total: 1, Deliveries: [{ Status: 'pending', Attempts: 0, LastError: null }] }, 'no attempt recorded by the CLI')
  await first.kill()
}

t.test('an operator CLI run never sends a delivery (SQLite)', (t) => cliNeverSends(t, null))

t.test('an operator CLI run never sends a delivery (MariaDB)', (t) => withScratchMariadb(t, (url) => cliNeverSends(t, url)))

// Three service starts per test: longer than tap's default 30 s per file.
t.setTimeout(240_000)

t.test('SIGKILL between the change and the delivery (SQLite)', (t) => killedBeforeDelivery(t, null))

t.test('SIGKILL between the change and the delivery (MariaDB)', (t) => withScratchMariadb(t, (url) => killedBeforeDelivery(t, url)))

t.test('two processes on one MariaDB never both deliver one event', (t) =>
  withScratchMariadb(t, async (url) => {
    const receiver = await startReceiver(t)
    const service = await cluster(t, url)
    const one = await service.start(20)
    const two = await service.start(20)
    t.equal((await service.call(one.port, 'POST', '/Api/Create/Webhook', { Url: receiver.url, Events: ['key.changed'] })).status, 200)
    const groups = (await service.call(one.port, 'GET', '/Api/Read/Groups')).json as { Id: number }[]
    const key = await service.call(two.port, 'POST', '/Api/Create/Key', { Display_Name: 'Shared', GroupId: groups[0].Id, Require_Https: 0 })
    const edits = 30
    for (let edit = 0; edit < edits; edit++) {
      const answer = await service.call(edit % 2 ? one.port : two.port, 'POST', '/Api/Edit/Key', { KeyId: key.json.Id, Phone: String(edit) })
      t.equal(answer.status, 200)
    }
    await receiver.waitFor(edits)
    await new Promise((done) => setTimeout(done, 500))
    t.equal(receiver.attemptIds.length, edits, 'one attempt per event')
    t.equal(new Set(receiver.attemptIds).size, edits, 'each webhook-id once')
    await one.kill()
    await two.kill()
  }))
