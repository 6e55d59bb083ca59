/**
 * Credits and tenant quotas with WORKERS=2 (issue 16): 200 concurrent calls against 50
 * credits give exactly 50 answers of 200 whichever worker answers (the count is spent
 * in the database), and a tenant quota counts the calls of three keys on both workers
 * together (through the primary, like the key windows). On SQLite and on MariaDB.
 * Credits need no Redis (the database is the one count); the "three processes
 * with Redis" case belongs to the Redis work of issue 15.
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

async function clusterRun(t: Test, databaseUrl: string | null): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-credits-cluster-'))
  const port = await freePort()
  const env: Record<string, string | undefined> = { ...process.env, DATA_DIR: dataDir, PORT: String(port), WORKERS: '2' }
  if (databaseUrl) env.DATABASE_URL = databaseUrl
  else delete env.DATABASE_URL
  const service = spawn(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const { output, waitFor } = watchChild(t, service)
  await waitFor('2 workers')
  t.match(output.text, /listening on .*; 2 workers/)

  const base = `http://127.0.0.1:${port}/v1.0`
  const stored = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
  const admin: SigningKey = { apiKey: stored.Api_Key, secret: stored.Api_Secret }
  const cli = (...words: string[]) => execFileSync(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', ...words], { env, encoding: 'utf8' }).trim()
  const today = cli('daycode')
  // A new connection per call (no keep-alive), so calls spread over both workers.
  const call = async (key: SigningKey, method: string, path: string, body?: unknown) => {
    const raw = body === undefined ? undefined : JSON.stringify(body)
    const headers: Record<string, string> = { ...signedHeaders(key, method, path, raw, { today: body === undefined ? undefined : today, date: new Date().toISOString() }), connection: 'close' }
    if (raw) headers['content-type'] = 'application/json'
    const response = await fetch(base + path, { method, headers, body: raw })
    return { status: response.status, text: await response.text() }
  }
  const groups = JSON.parse((await call(admin, 'GET', '/Api/Read/Groups')).text) as { Id: number }[]
  const create = async (body: Record<string, unknown>): Promise<SigningKey> => {
    const created = await call(admin, 'POST', '/Api/Create/Key', { Display_Name: `clustered ${Math.random()}`, GroupId: groups.map((group) => group.Id), Require_Https: 0, ...body })
    t.equal(created.status, 200, 'key created')
    const json = JSON.parse(created.text)
    return { apiKey: json.Api_Key, secret: json.Api_Secret }
  }
  const tally = (statuses: number[]) => statuses.reduce<Record<number, number>>((counts, status) => ({ ...counts, [status]: (counts[status] ?? 0) + 1 }), {})

  const metered = await create({ Credits: 50 })
  const answers = await Promise.all(Array.from({ length: 200 }, () => call(metered, 'GET', '/Api/Read/Acl')))
  t.same(tally(answers.map((answer) => answer.status)), { 200: 50, 429: 150 }, 'exactly 50 of 200, across both workers')
  t.equal(answers.find((answer) => answer.status === 429)?.text, 'Error: No credits left')

  // The tenant quota is set before its keys' first call (a running process reads it with the key).
  cli('tenant', 'set', '--parent', '1', '--custno', '5', '--max-hits', '10/1Hour')
  const keys = [await create({ Defaults: { Custno: 5 } }), await create({ Defaults: { Custno: 5 } }), await create({ Defaults: { Custno: 5 } })]
  const quota = await Promise.all(Array.from({ length: 30 }, (_, index) => call(keys[index % 3], 'GET', '/Api/Read/Acl')))
  t.same(tally(quota.map((answer) => answer.status)), { 200: 10, 429: 20 }, 'ten calls of three keys in all, across both workers')
  t.equal(quota.find((answer) => answer.status === 429)?.text, 'Error: Tenant rate limit exceeded (10/1Hour)')

  service.kill('SIGTERM')
  t.equal(await new Promise((resolve) => service.once('exit', resolve)), 0, 'stops cleanly')
}

t.test('WORKERS=2 on SQLite', (t) => clusterRun(t, null))

t.test('WORKERS=2 on MariaDB', (t) => withScratchMariadb(t, (url) => clusterRun(t, url)))
