/**
 * Issue 12, item 6: the master key.
 * - `admin master-key rotate` re-seals every API secret and the day secret under a new
 *   key in one transaction, with the generated key file and with MASTER_KEY given as a
 *   value; keys made before authenticate afterwards, the day code is unchanged.
 * - An interrupted rotation (a failure mid-way, or after the commit) leaves every
 *   secret readable and the service working.
 * - It re-seals webhook secrets and stored Idempotency-Key answers too; a stored answer
 *   (which may hold a new key's secret) is never plain in the database.
 * - A built-in plugin's secrets are re-sealed while the config disables it (webhooks);
 *   a folder plugin that recorded sealed columns and is not loaded makes the command
 *   refuse, exit 1, before anything changes.
 * - `npm start` prints one warning line while the master key is in the data folder.
 */
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { forEachDatabase, startService, type DatabaseKind, type Service } from './helpers/service.ts'
import { insertKey, keyTestGroups, type TestKey } from './helpers/keys.ts'
import { fastWebhooks, startReceiver } from './helpers/webhookReceiver.ts'
import { Webhook } from 'standardwebhooks'
import { masterSecretBox, SecretBox } from '../kernel/auth/secrets.ts'
import { masterKeyWarning } from '../kernel/auth/masterKey.ts'
import type { Kysely } from 'kysely'
import { rotateMasterKey } from '../scripts/admin/masterKey.ts'
import { runAdmin } from './helpers/adminCli.ts'
import { vaultPlugin } from './helpers/vaultPlugin.ts'

async function sealedRows(service: Service) {
  const { db } = service.kernel.database
  const keys = await db.selectFrom('api_keys').select(['api_key', 'secret_enc']).orderBy('id').execute()
  const day = await db.selectFrom('kernel_settings').select('value').where('name', '=', 'day_secret').executeTakeFirstOrThrow()
  return { keys, day: day.value }
}

function opensAll(box: SecretBox, rows: Awaited<ReturnType<typeof sealedRows>>): boolean {
  try {
    for (const row of rows.keys) box.open(row.secret_enc, row.api_key)
    box.open(rows.day, 'day-secret')
    return true
  } catch {
    return false
  }
}

async function allAuthenticate(t: Test, service: Service, keys: TestKey[], label: string) {
  for (const key of [service.admin, ...keys]) {
    const call = await service.call('GET', '/Api/Read/Acl', { key })
    t.equal(call.status, 200, `${label}: key ${key.apiKey.slice(0, 10)}... authenticates`)
  }
  // A call that needs the day code: the day secret survived too.
  t.equal((await service.call('GET', '/Api/Read/Acl', { today: true })).status, 200, `${label}: the day code is accepted`)
}

const silent = () => {}

/**
 * Restarts through the first service, whose teardown stops whatever runs last (restarting
 * a restarted service would leave the last one running past the test).
 */
async function restarted(first: Service, current: Service, overrides: Partial<Service['config']> = {}): Promise<Service> {
  await current.stop()
  return first.restart(overrides)
}

/** A service with webhooks, and one webhook that hears key changes. */
async function serviceWithWebhook(t: Test, kind: DatabaseKind) {
  const first = await startService(t, { kind, config: fastWebhooks })
  const receiver = await startReceiver(t)
  const webhook = await first.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: ['key.changed'] }, today: true })
  t.equal(webhook.status, 200, webhook.text)
  return { first, receiver, webhook, groups: await keyTestGroups(first) }
}

/** A key edit is delivered, signed with the webhook's secret as it was made: the sealed secret still opens. */
async function deliverySigned(t: Test, service: Service, receiver: Awaited<ReturnType<typeof startReceiver>>, secret: string, keyId: number) {
  t.equal((await service.call('POST', '/Api/Edit/Key', { body: { KeyId: keyId, Email: 'ops@example.com' }, today: true })).status, 200)
  const [delivery] = await receiver.waitFor(1)
  t.doesNotThrow(() => new Webhook(secret).verify(delivery.body, { 'webhook-id': delivery.id, 'webhook-timestamp': delivery.timestamp, 'webhook-signature': delivery.signature }), 'the webhook still signs with its secret')
}

t.test('rotation with the generated key file', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const first = await startService(t, { kind })
    let service = first
    const keyFile = join(service.config.dataDir, 'master.key')
    const oldFile = readFileSync(keyFile, 'utf8')
    const oldKey = Buffer.from(oldFile.trim(), 'hex')
    const keys = [await insertKey(service), await insertKey(service), await insertKey(service)]
    const daySecret = Buffer.from(service.kernel.daySecret)
    const before = await sealedRows(service)

    // A failure mid-way: nothing changed, the old key file is back, every secret opens with it.
    await t.rejects(rotateMasterKey(service.kernel, { announce: silent, failAfterSecrets: 2 }), { message: 'simulated failure after 2 secrets' })
    t.equal(readFileSync(keyFile, 'utf8'), oldFile, 'the key file holds the old key again')
    t.same(await sealedRows(service), before, 'no secret was re-sealed')
    const rotations = () => service.kernel.database.db.selectFrom('api_audit').selectAll().where('action', '=', 'master-key.rotate').orderBy('id').execute()
    t.same(await rotations(), [], 'nor audited')
    service = await restarted(first, service)
    await allAuthenticate(t, service, keys, 'after an interrupted rotation')

    // A failure after the commit (before the file holds the new key alone): both keys are in the file.
    await t.rejects(rotateMasterKey(service.kernel, { announce: silent, failAfterCommit: true }), { message: 'simulated failure after the commit' })
    const twoLines = readFileSync(keyFile, 'utf8').trim().split('\n')
    t.equal(twoLines.length, 2, 'new key first, old key after')
    t.equal(twoLines[1], oldKey.toString('hex'))
    t.notOk(opensAll(new SecretBox(oldKey), await sealedRows(service)), 'the rows are sealed under the new key')
    service = await restarted(first, service)
    await allAuthenticate(t, service, keys, 'after a rotation interrupted after its commit')

    // A whole rotation: the file holds one new key, 0600; the old key opens nothing.
    const result = await rotateMasterKey(service.kernel, { announce: silent })
    t.same(result, { Secrets: keys.length + 1, Settings: 1, Sealed: 0, Key: keyFile })
    const newText = readFileSync(keyFile, 'utf8')
    t.match(newText, /^[0-9a-f]{64}\n$/)
    t.not(newText.trim(), twoLines[0], 'a new key again')
    t.equal(statSync(keyFile).mode & 0o777, 0o600)
    const after = await sealedRows(service)
    t.ok(opensAll(new SecretBox(Buffer.from(newText.trim(), 'hex')), after), 'the new key opens every secret')
    t.notOk(opensAll(new SecretBox(oldKey), after), 'the old key opens none')
    t.notOk(opensAll(new SecretBox(Buffer.from(twoLines[0], 'hex')), after), 'nor the key of the interrupted run')
    service = await restarted(first, service)
    t.same(service.kernel.daySecret, daySecret, 'the day secret is the same')
    await allAuthenticate(t, service, keys, 'after the rotation')

    // Each committed rotation left one audit record by the operator, for the installation (0/0), with no key in it.
    const audited = await rotations()
    t.equal(audited.length, 2, 'the rotation interrupted after its commit and the whole one')
    for (const record of audited) {
      t.match(record, { who_key_id: null, parent: 0, custno: 0, key_id: null, before: null })
      t.same(JSON.parse(record.after!), { Secrets: keys.length + 1, Settings: 1, Sealed: 0 })
    }
    const text = JSON.stringify(audited)
    for (const key of [oldKey.toString('hex'), ...twoLines, newText.trim()]) t.notOk(text.includes(key), 'no master key in the record')
  }),
)

t.test('a rotation re-seals webhook secrets and stored Idempotency-Key answers', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { first, receiver, webhook, groups } = await serviceWithWebhook(t, kind)
    const body = { Display_Name: 'Made once', GroupId: [groups.aclReader], Require_Https: 0 }
    const create = (service: typeof first) => service.call('POST', '/Api/Create/Key', { body, today: true, date: new Date().toISOString(), headers: { 'Idempotency-Key': 'make-1' } })
    const made = await create(first)
    t.equal(made.status, 200, made.text)
    const stored = await first.kernel.database.db.selectFrom('api_idempotency').select('body').where('idem_key', '=', 'make-1').executeTakeFirstOrThrow()
    t.match(stored.body, /^v1:/, 'the stored answer is sealed')
    const dumped = stored.body! + Buffer.from(stored.body!.slice(3), 'base64').toString('latin1')
    t.notOk(dumped.includes(made.json.Api_Secret), 'a database dump does not show the new secret')

    const result = await rotateMasterKey(first.kernel, { announce: silent })
    t.match(result, { Secrets: 2, Settings: 1, Sealed: 2 })
    const service = await restarted(first, first)
    const retried = await create(service)
    t.equal(retried.status, 200, retried.text)
    t.equal(retried.headers.get('idempotent-replayed'), 'true')
    t.equal(retried.json.Api_Secret, made.json.Api_Secret, 'the stored answer opens under the new key')
    await deliverySigned(t, service, receiver, webhook.json.Secret, made.json.Id)
  }),
)

t.test('a rotation while webhooks are disabled in the config still re-seals their secrets', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const { first, receiver, webhook, groups } = await serviceWithWebhook(t, kind)
    const made = await first.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Edited later', GroupId: [groups.aclReader], Require_Https: 0 }, today: true })
    t.equal(made.status, 200, made.text)

    const withoutWebhooks = await restarted(first, first, { plugins: first.config.plugins.filter((name) => name !== 'webhooks') })
    t.notOk(withoutWebhooks.kernel.routes().some((route) => route.plugin === 'webhooks'), 'webhooks is disabled for the rotation')
    const result = await rotateMasterKey(withoutWebhooks.kernel, { announce: silent })
    t.match(result, { Secrets: 2, Settings: 1, Sealed: 1 }, 'the webhook secret is counted')
    const newKey = Buffer.from(readFileSync(join(first.config.dataDir, 'master.key'), 'utf8').trim(), 'hex')
    const webhooks = withoutWebhooks.kernel.database.db as unknown as Kysely<{ webhooks: { id: number; secret_enc: string } }>
    const stored = await webhooks.selectFrom('webhooks').select('secret_enc').executeTakeFirstOrThrow()
    t.equal(new SecretBox(newKey).open(stored.secret_enc, `webhook:${webhook.json.Id}`), webhook.json.Secret, 'the stored secret opens with the new key')

    // Enabled again (the first service's config): a delivery is signed with the same secret.
    const service = await restarted(first, withoutWebhooks)
    await deliverySigned(t, service, receiver, webhook.json.Secret, made.json.Id)
  }),
)

t.test('a folder plugin with sealed columns that is not loaded makes the rotation refuse', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const first = await startService(t, { kind, plugins: [vaultPlugin] })
    const vaultOf = (service: Service) => service.kernel.database.db as unknown as Kysely<{ vault_items: { id: number; token_enc: string | null } }>
    await vaultOf(first).insertInto('vault_items').values({ id: 1, token_enc: first.kernel.secrets.seal('team token', 'vault:1') }).execute()
    await insertKey(first)
    const keyFile = join(first.config.dataDir, 'master.key')
    const oldFile = readFileSync(keyFile, 'utf8')
    const vaultRows = (service: Service) => vaultOf(service).selectFrom('vault_items').selectAll().orderBy('id').execute()
    const before = { sealed: await sealedRows(first), vault: await vaultRows(first) }
    await first.stop()

    // The operator's CLI on the default plugins: vault is not among them.
    const refused = await runAdmin(['master-key', 'rotate'], { DATA_DIR: first.config.dataDir, DATABASE_URL: first.config.databaseUrl ?? undefined, PLUGINS: undefined })
    t.equal(refused.code, 1, refused.stderr)
    const errors = refused.stderr.split('\n').filter((line) => line.startsWith('admin:'))
    t.same(errors, ["admin: master-key rotate refused, nothing was changed: plugin 'vault' (vault_items.token_enc) keeps sealed secrets but is not enabled in this configuration; enable it (PLUGINS) for the rotation, or those secrets would never open again"])
    t.equal(refused.stdout, '', 'no new key is announced')
    t.equal(readFileSync(keyFile, 'utf8'), oldFile, 'the key file is unchanged')

    const service = await first.restart()
    t.same({ sealed: await sealedRows(service), vault: await vaultRows(service) }, before, 'no secret was re-sealed')
    // With the plugin loaded the rotation goes through and re-seals its column.
    t.match(await rotateMasterKey(service.kernel, { announce: silent }), { Secrets: 2, Settings: 1, Sealed: 1 })
    const newKey = Buffer.from(readFileSync(keyFile, 'utf8').trim(), 'hex')
    const [row] = await vaultRows(service)
    t.equal(new SecretBox(newKey).open(row.token_enc!, 'vault:1'), 'team token', "the plugin's secret opens with the new key")
  }),
)

t.test('the CLI refuses to rotate while the service runs on the database, which would go on sealing with the old key', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const first = await startService(t, { kind })
    const keyFile = join(first.config.dataDir, 'master.key')
    const oldFile = readFileSync(keyFile, 'utf8')
    const before = await sealedRows(first)
    const env = { DATA_DIR: first.config.dataDir, DATABASE_URL: first.config.databaseUrl ?? undefined, PLUGINS: undefined }
    const refused = await runAdmin(['master-key', 'rotate'], env)
    t.equal(refused.code, 1, refused.stderr)
    const errors = refused.stderr.split('\n').filter((line) => line.startsWith('admin:'))
    t.match(errors, [/^admin: master-key rotate refused, nothing was changed: the service is running on this database: .+ \(node \d+, port \d+\), seen in the last \d+ s\. Stop every process first/])
    t.equal(refused.stdout, '', 'no new key is announced')
    t.equal(readFileSync(keyFile, 'utf8'), oldFile, 'the key file is unchanged')
    t.same(await sealedRows(first), before, 'nothing was re-sealed')
    t.equal((await first.call('GET', '/Api/Read/Acl')).status, 200, 'the service goes on')
    // Stopped, the rotation goes through.
    await first.stop()
    const rotated = await runAdmin(['master-key', 'rotate'], env)
    t.equal(rotated.code, 0, rotated.stderr)
    t.not(readFileSync(keyFile, 'utf8'), oldFile)
  }),
)

t.test('a rotation interrupted with NEW_MASTER_KEY is finished by a run with the same NEW_MASTER_KEY', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const first = await startService(t, { kind })
    let service = first
    const keyFile = join(service.config.dataDir, 'master.key')
    const oldKey = readFileSync(keyFile, 'utf8').trim()
    const keys = [await insertKey(service), await insertKey(service)]
    const newKey = randomBytes(32)
    // Killed before the commit: the file holds the new key and the old; the rows are under the old.
    writeFileSync(keyFile, `${newKey.toString('hex')}\n${oldKey}\n`, { mode: 0o600 })
    service = await restarted(first, service)
    t.same(await rotateMasterKey(service.kernel, { newKey, announce: silent }), { Secrets: keys.length + 1, Settings: 1, Sealed: 0, Key: keyFile })
    t.equal(readFileSync(keyFile, 'utf8'), `${newKey.toString('hex')}\n`, 'the run is finished: the new key alone')
    // Killed after the commit: the rows are under the new key, the file still holds both.
    const next = randomBytes(32)
    await t.rejects(rotateMasterKey(service.kernel, { newKey: next, announce: silent, failAfterCommit: true }))
    service = await restarted(first, service)
    t.same(await rotateMasterKey(service.kernel, { newKey: next, announce: silent }), { Secrets: keys.length + 1, Settings: 1, Sealed: 0, Key: keyFile })
    t.equal(readFileSync(keyFile, 'utf8'), `${next.toString('hex')}\n`)
    await t.rejects(rotateMasterKey(service.kernel, { newKey: next, announce: silent }), { message: 'the new master key is already in use' }, 'a key the file holds alone is in use')
    service = await restarted(first, service)
    await allAuthenticate(t, service, keys, 'after the finished rotations')
  }),
)

t.test('rotation with MASTER_KEY given as a value', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const oldHex = randomBytes(32).toString('hex')
    const first = await startService(t, { kind, config: { masterKey: oldHex } })
    let service = first
    const keys = [await insertKey(service), await insertKey(service)]
    const before = await sealedRows(service)

    const announced: string[] = []
    await t.rejects(rotateMasterKey(service.kernel, { announce: (line) => announced.push(line), failAfterSecrets: 1 }))
    t.same(await sealedRows(service), before, 'an interrupted run changes nothing')
    t.ok(opensAll(new SecretBox(Buffer.from(oldHex, 'hex')), before))

    const newKey = randomBytes(32)
    announced.length = 0
    const result = await rotateMasterKey(service.kernel, { newKey, announce: (line) => announced.push(line) })
    t.same(announced, [`MASTER_KEY=${newKey.toString('hex')}`], 'the new value is printed once')
    t.same(result, { Secrets: keys.length + 1, Settings: 1, Sealed: 0, Key: 'MASTER_KEY' })
    const after = await sealedRows(service)
    t.notOk(opensAll(new SecretBox(Buffer.from(oldHex, 'hex')), after), 'the old value opens nothing')
    service = await restarted(first, service, { masterKey: newKey.toString('hex') })
    await allAuthenticate(t, service, keys, 'with the new MASTER_KEY')
    await t.rejects(rotateMasterKey(service.kernel, { newKey, announce: silent }), { message: 'the new master key is the one in use' })
  }),
)

function run(args: string[], env: Record<string, string>, until?: RegExp): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import=tsx', ...args], { env: { ...process.env, ...env, CONFIG_FILE: '' }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    const check = () => {
      if (until && until.test(stdout)) child.kill('SIGTERM')
    }
    child.stdout.on('data', (chunk) => {
      stdout += chunk
      check()
    })
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('error', reject)
    child.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

t.test('the CLI and the start warning (SQLite, real processes)', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-master-key-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const base = { DATA_DIR: dataDir, PORT: '0', DATABASE_URL: '', MASTER_KEY: '', NEW_MASTER_KEY: '' }

  const started = await run(['kernel/boot/main.ts'], base, /keygate listening/)
  // The service log is JSON lines on stdout; the warning is one of them, at level warn.
  const warnings = started.stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line)).filter((line) => line.level === 'warn' && String(line.msg).includes('master key')).map((line) => line.msg)
  t.same(warnings, [`keygate: warning: the master key is in the data folder (${join(dataDir, 'master.key')}); a copy of that folder opens every stored secret. Set MASTER_KEY to the key or to a file outside it (SECURITY.md, "Master key").`])

  const oldFile = readFileSync(join(dataDir, 'master.key'), 'utf8')
  const codeBefore = await run(['scripts/admin.ts', 'daycode'], base)
  const rotated = await run(['scripts/admin.ts', 'master-key', 'rotate', '--json'], base)
  t.equal(rotated.code, 0, rotated.stderr)
  t.match(JSON.parse(rotated.stdout), { Secrets: 1, Settings: 1, Key: join(dataDir, 'master.key') })
  t.not(readFileSync(join(dataDir, 'master.key'), 'utf8'), oldFile)
  const codeAfter = await run(['scripts/admin.ts', 'daycode'], base)
  t.equal(codeAfter.code, 0)
  t.equal(codeAfter.stdout, codeBefore.stdout, 'the day secret opens under the new key')

  // Move to a value: MASTER_KEY set to the file's key, then rotated to a printed value.
  const valueKey = readFileSync(join(dataDir, 'master.key'), 'utf8').trim()
  rmSync(join(dataDir, 'master.key'))
  const byValue = await run(['scripts/admin.ts', 'master-key', 'rotate'], { ...base, MASTER_KEY: valueKey })
  t.equal(byValue.code, 0, byValue.stderr)
  const printed = /^MASTER_KEY=([0-9a-f]{64})$/m.exec(byValue.stdout)
  t.ok(printed, 'the new value is printed')
  t.equal(byValue.stdout.split(printed![1]).length, 2, 'once')
  t.equal((await run(['scripts/admin.ts', 'daycode'], { ...base, MASTER_KEY: printed![1] })).stdout, codeBefore.stdout)
  const oldValue = await run(['scripts/admin.ts', 'daycode'], { ...base, MASTER_KEY: valueKey })
  t.equal(oldValue.code, 1, 'the old value no longer opens the secrets')
  // A rotation killed after its COMMIT left just this state and no success: the refusal says which value to set.
  t.match(oldValue.stderr, /after an `admin master-key rotate` that did not report success, set MASTER_KEY to the value it printed/)

  const quiet = await run(['kernel/boot/main.ts'], { ...base, MASTER_KEY: printed![1] }, /keygate listening/)
  t.match(quiet.stdout, /keygate listening/)
  t.notMatch(quiet.stderr, /master key/, 'no warning when the key is not in the data folder')
})

t.test('MASTER_KEY as a file; the warning names only a key inside the data folder', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'keygate-key-file-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  const dataDir = join(folder, 'data')
  const keyFile = join(folder, 'master.key')
  const key = randomBytes(32)
  writeFileSync(keyFile, key.toString('hex') + '\n', { mode: 0o600 })
  const sealed = new SecretBox(key).seal('secret', 'context')
  t.equal(masterSecretBox(keyFile, dataDir).open(sealed, 'context'), 'secret', 'the file is read')
  t.throws(() => masterSecretBox(join(folder, 'missing.key'), dataDir), { message: `master key file ${join(folder, 'missing.key')} does not exist` })
  t.equal(masterKeyWarning(keyFile, dataDir), null, 'a file outside the data folder')
  t.equal(masterKeyWarning(key.toString('hex'), dataDir), null, 'a value')
  t.match(masterKeyWarning(null, dataDir), /^keygate: warning: the master key is in the data folder/)
  t.match(masterKeyWarning(join(dataDir, 'keys', 'k'), dataDir), /^keygate: warning: the master key is in the data folder/, 'a file inside it')
})
