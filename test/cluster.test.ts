import t from 'tap'
import { spawn, execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { freePort } from './helpers/freePort.ts'
import { watchChild } from './helpers/childService.ts'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { signedHeaders, type SigningKey } from '../kernel/auth/signature.ts'

t.test('WORKERS=2: limits, cache invalidation and read-your-writes hold across workers', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-cluster-'))
  const port = await freePort()
  const env = { ...process.env, DATA_DIR: dataDir, PORT: String(port), WORKERS: '2' }
  delete (env as Record<string, string | undefined>).DATABASE_URL
  const service = spawn(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const { output, waitFor } = watchChild(t, service)
  await waitFor('2 workers')
  t.match(output.text, /listening on .*; 2 workers/)

  const base = `http://127.0.0.1:${port}/v1.0`
  const stored = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
  const admin: SigningKey = { apiKey: stored.Api_Key, secret: stored.Api_Secret }
  const today = execFileSync(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', 'daycode'], { env, encoding: 'utf8' }).trim()
  // A new connection per call (no keep-alive), so calls spread over both workers.
  const call = async (key: SigningKey, method: string, path: string, body?: unknown, code?: string) => {
    const raw = body === undefined ? undefined : JSON.stringify(body)
    const headers: Record<string, string> = { ...signedHeaders(key, method, path, raw, { today: code }), connection: 'close' }
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

  service.kill('SIGTERM')
  const code = await new Promise((resolve) => service.once('exit', resolve))
  t.equal(code, 0, 'SIGTERM stops primary and workers cleanly')
})
