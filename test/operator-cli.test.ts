/**
 * Issue 14.2 and 14.5: the operator CLI names its database on every run, never
 * overwrites admin-key.json, says one line for a wrong master key, and has key
 * disable|enable|show, group list, acl list|remove and root-key; without Redis a
 * running service sees the CLI's ACL change in its cached answers too (the database's
 * change stamp).
 */
import t, { type Test } from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createScratchDatabase, mysqlProblem, mysqlRequired } from './helpers/scratchDatabase.ts'
import { adminOn, runAdmin } from './helpers/adminCli.ts'
import { freePort } from './helpers/freePort.ts'
import { forEachDatabase, startService } from './helpers/service.ts'
import { groupNamed } from './helpers/keys.ts'
import { loadConfig } from '../kernel/boot/config.ts'
import { nameProblem } from '../kernel/http/nameRule.ts'
import SQLite from 'better-sqlite3'
import { loadMasterKey, SecretBox } from '../kernel/auth/secrets.ts'

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-cli-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A fresh MariaDB database, dropped at the test's end; null when no server answers (outside CI only). */
async function mariadbDatabase(t: Test): Promise<string | null> {
  const problem = await mysqlProblem()
  if (problem !== null) {
    if (mysqlRequired) throw new Error(`MariaDB is required here but not reachable: ${problem}`)
    return null
  }
  const scratch = await createScratchDatabase()
  t.teardown(() => scratch.drop())
  return scratch.url
}

t.test('a second database bootstrapped into the same folder writes admin-key-2.json and says so', async (t) => {
  const dataDir = tempDir(t)
  const first = await runAdmin(['key', 'list', '--json'], { DATA_DIR: dataDir })
  t.equal(first.code, 0, first.stderr)
  t.equal(first.stderr, `keygate admin: SQLite ${join(dataDir, 'keygate.sqlite')}\nadmin: first start - the root admin key was written to ${join(dataDir, 'admin-key.json')}\n`)
  const original = readFileSync(join(dataDir, 'admin-key.json'), 'utf8')
  t.equal(JSON.parse(original).Api_Key, JSON.parse(first.stdout)[0].Api_Key)
  const databaseUrl = await mariadbDatabase(t)
  if (!databaseUrl) {
    t.comment('MariaDB not reachable: the second-database half is skipped')
    return
  }
  const second = await runAdmin(['key', 'list', '--json'], { DATA_DIR: dataDir, DATABASE_URL: databaseUrl })
  t.equal(second.code, 0, second.stderr)
  const label = `MySQL ${new URL(databaseUrl).username}@${new URL(databaseUrl).hostname}:${new URL(databaseUrl).port || 3306}${new URL(databaseUrl).pathname}`
  t.equal(second.stderr, `keygate admin: ${label}\nadmin: first start - the root admin key was written to ${join(dataDir, 'admin-key-2.json')}\n` +
    `admin: warning: ${dataDir} already holds the admin key of another database; this run made a new, empty one (${label}). Is DATABASE_URL set as for the service?\n`,
    'a CLI run on the wrong database (DATABASE_URL forgotten or different) says so')
  t.equal(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'), original, 'the SQLite root key file is untouched')
  t.equal(JSON.parse(readFileSync(join(dataDir, 'admin-key-2.json'), 'utf8')).Api_Key, JSON.parse(second.stdout)[0].Api_Key)
  // The service's own first start says where the key went, and how to use it.
  const thirdUrl = await mariadbDatabase(t)
  const env: Record<string, string> = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: thirdUrl!, PORT: '0' } as Record<string, string>
  delete env.MASTER_KEY
  const service = spawn(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => { if (service.exitCode === null) service.kill('SIGKILL') })
  let output = ''
  service.stdout.on('data', (chunk) => (output += chunk))
  await new Promise<void>((resolve) => {
    service.stdout.on('data', () => { if (output.includes('Try it')) resolve() })
    service.on('exit', () => resolve())
  })
  service.kill('SIGTERM')
  t.match(output, `First start: created the root admin key (shown once; ${join(dataDir, 'admin-key.json')} exists already (another database's root key) and was left as it is; also in ${join(dataDir, 'admin-key-3.json')}, mode 0600)`)
  t.match(output, `Try it: npm run --silent call -- GET /Api/Read/Acl --key-file ${join(dataDir, 'admin-key-3.json')}\n`)
  t.equal(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'), original, 'still untouched')

  const daycode = await runAdmin(['daycode'], { DATA_DIR: dataDir, DATABASE_URL: databaseUrl })
  t.equal(daycode.stderr, `keygate admin: ${label}\n`, 'daycode says which database its code belongs to')
  t.match(daycode.stdout, /^\d{8}\n$/)
})

t.test('a wrong master key: one line, exit 1, for the service and the CLI', async (t) => {
  const dataDir = tempDir(t)
  t.equal((await runAdmin(['daycode'], { DATA_DIR: dataDir })).code, 0)
  const wrong = 'cd'.repeat(32)
  const cli = await runAdmin(['daycode'], { DATA_DIR: dataDir, MASTER_KEY: wrong })
  t.equal(cli.code, 1)
  t.equal(cli.stderr.split('\n')[1], 'admin: the master key does not open this database (its secrets were sealed under another key: set MASTER_KEY, or put back the dataDir/master.key, that this database was created with; after an `admin master-key rotate` that did not report success, set MASTER_KEY to the value it printed)')
  const env: Record<string, string> = { ...process.env, DATA_DIR: dataDir, MASTER_KEY: wrong, PORT: '0' } as Record<string, string>
  delete env.DATABASE_URL
  const service = spawnSync(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env, encoding: 'utf8', timeout: 60_000 })
  t.equal(service.status, 1)
  t.equal(service.stderr, 'keygate: the master key does not open this database (its secrets were sealed under another key: set MASTER_KEY, or put back the dataDir/master.key, that this database was created with; after an `admin master-key rotate` that did not report success, set MASTER_KEY to the value it printed)\n')
  t.notMatch(service.stderr, /Unsupported state/)
})

t.test('a lost master.key: the refused start and CLI leave no new key file behind', async (t) => {
  const dataDir = tempDir(t)
  t.equal((await runAdmin(['daycode'], { DATA_DIR: dataDir })).code, 0)
  const keyFile = join(dataDir, 'master.key')
  rmSync(keyFile)
  const cli = await runAdmin(['daycode'], { DATA_DIR: dataDir })
  t.equal(cli.code, 1)
  t.match(cli.stderr, 'admin: the master key does not open this database')
  t.notOk(existsSync(keyFile), 'the key the CLI made, which opens nothing, is gone')
  const env: Record<string, string> = { ...process.env, DATA_DIR: dataDir, PORT: '0' } as Record<string, string>
  delete env.DATABASE_URL
  delete env.MASTER_KEY
  const service = spawnSync(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env, encoding: 'utf8', timeout: 60_000 })
  t.equal(service.status, 1)
  t.match(service.stderr, 'keygate: the master key does not open this database')
  t.notOk(existsSync(keyFile), 'so is the one the service made')
})

t.test('key show|disable|enable, group list, acl list|remove, root-key', async (t) => {
  const dataDir = tempDir(t)
  const env = { DATA_DIR: dataDir }
  const admin = (...args: string[]) => runAdmin(args, env)
  const made = JSON.parse((await admin('key', 'bootstrap', '--parent', '7', '--custno', '1', '--name', 'tenant admin', '--json')).stdout)
  t.equal(made.Id, 2)

  const shown = await admin('key', 'show', '2', '--json')
  t.equal(shown.code, 0)
  const record = JSON.parse(shown.stdout)
  t.match(record, { Id: 2, Name: 'tenant admin', Parent: 7, Custno: 1, EndDate: null, Active: 1 })
  t.ok(record.Groups.some((group: string) => / Key administration$/.test(group)), 'with the groups it holds')

  const disabled = await admin('key', 'disable', '2', '--json')
  t.equal(disabled.code, 0, disabled.stderr)
  t.match(JSON.parse(disabled.stdout), { Id: 2, Active: 0, EndDate: /GMT$/ })
  t.match(disabled.stderr, /admin: a running service sees this within 5 s\n/)
  const disabledAgain = await admin('key', 'disable', '2', '--json')
  t.equal(disabledAgain.code, 0, disabledAgain.stderr)
  t.equal(JSON.parse(disabledAgain.stdout).EndDate, JSON.parse(disabled.stdout).EndDate, 'a disabled key keeps the date it was disabled')
  t.match(disabledAgain.stderr, /admin: key 2 is already disabled; nothing changed\n/)
  const listed = JSON.parse((await admin('key', 'list', '--json')).stdout)
  t.same(listed.map((key: { Id: number; Active: number }) => [key.Id, key.Active]), [[1, 1], [2, 0]])
  t.match(JSON.parse((await admin('key', 'enable', '2', '--json')).stdout), { Id: 2, Active: 1, EndDate: null })
  const missing = await admin('key', 'disable', '99')
  t.equal(missing.code, 2)
  t.match(missing.stderr, /admin: no key 99\n$/)
  t.equal((await admin('key', 'disable', 'x')).code, 2)

  const groups = JSON.parse((await admin('group', 'list', '--json')).stdout)
  t.match(groups[0], { Id: 1, Display_Name: 'Key administration', Keys: 2, Paths: /\/Api\/Create\/Key/ })

  const added = JSON.parse((await admin('acl', 'add', '--path', '/Extra/Read/Thing', '--name', 'extra', '--group', '1', '--json')).stdout)
  let entries = JSON.parse((await admin('acl', 'list', '--json')).stdout)
  t.match(entries.find((entry: { Id: number }) => entry.Id === added.Id), { Path: '/Extra/Read/Thing', Display_Name: 'extra', Groups: '1', Is_Public: 0 })
  const removed = await admin('acl', 'remove', String(added.Id), '--json')
  t.equal(removed.code, 0, removed.stderr)
  t.same(JSON.parse(removed.stdout), { Id: added.Id, Path: '/Extra/Read/Thing', Removed: 1 })
  entries = JSON.parse((await admin('acl', 'list', '--json')).stdout)
  t.notOk(entries.some((entry: { Id: number }) => entry.Id === added.Id), 'gone')
  t.notOk(JSON.parse((await admin('group', 'list', '--json')).stdout)[0].Paths.includes('/Extra/Read/Thing'), 'and out of its group')
  const again = await admin('acl', 'remove', String(added.Id))
  t.equal(again.code, 2)
  t.match(again.stderr, /admin: no ACL entry \d+\n$/)

  const before = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
  const fresh = await admin('root-key', '--json')
  t.equal(fresh.code, 0, fresh.stderr)
  const rotated = JSON.parse(fresh.stdout)
  t.equal(rotated.Id, before.Id)
  t.equal(rotated.Api_Key, before.Api_Key, 'the same Api_Key')
  t.not(rotated.Api_Secret, before.Api_Secret, 'a new secret')
  t.match(rotated.Api_Secret, /^[A-Za-z0-9_-]{43}$/)
  t.equal(JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8')).Api_Secret, before.Api_Secret, 'printed once, written nowhere')
  t.match(fresh.stderr, `admin: ${join(dataDir, 'admin-key.json')} still holds the old secret`, 'and the stale key file is named')
  t.notOk(existsSync(join(dataDir, 'admin-key-2.json')))
  const database = new SQLite(join(dataDir, 'keygate.sqlite'), { readonly: true })
  const sealed = (database.prepare('select secret_enc from api_keys where id = ?').get(before.Id) as { secret_enc: string }).secret_enc
  database.close()
  const box = new SecretBox(loadMasterKey(null, dataDir))
  t.equal(box.open(sealed, before.Api_Key), rotated.Api_Secret, 'the stored secret is the new one, sealed')
})

t.test("without Redis, a running service's cached answers follow an operator's ACL change", (t) =>
  forEachDatabase(t, async (t, kind) => {
    // Keys are reloaded every 2 s here, so the stamp is read every 2 s; the cached answer would live an hour.
    const service = await startService(t, { kind, config: { cache: { ...loadConfig({}, {}).cache, keyTtlSeconds: 2 } } })
    t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200)
    const cached = await service.call('GET', '/Api/Read/Acl')
    t.equal(cached.headers.get('x-cache'), 'HIT', 'the answer is the response cache\'s')
    const group = await groupNamed(service, 'Access list reader')
    const added = await adminOn(service, 'acl', 'add', '--path', '/Probe/Read/Thing', '--name', 'Operator probe', '--group', String(group), '--json')
    t.equal(added.code, 0, added.stderr)
    t.match(added.stderr, /admin: a running service sees this within 5 s\n/, 'acl add says when a running service sees it, as acl remove does')
    const paths = async () => ((await service.call('GET', '/Api/Read/Acl')).json as { Path: string }[]).map((entry) => entry.Path)
    const deadline = Date.now() + 15_000
    while (!(await paths()).includes('/Probe/Read/Thing') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200))
    t.ok((await paths()).includes('/Probe/Read/Thing'), 'GET /Api/Read/Acl lists the new entry')
    const removed = await adminOn(service, 'acl', 'remove', JSON.parse(added.stdout).Id)
    t.equal(removed.code, 0, removed.stderr)
    t.match(removed.stderr, /admin: a running service sees this within 5 s\n/, "the CLI's own config: keyTtlSeconds 60")
  }),
)

t.test('a group made by group add is held by the root key, which gives it to the keys it creates', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const made = await adminOn(service, 'group', 'add', '--name', 'Operators readers', '--json')
    t.equal(made.code, 0, made.stderr)
    const group = JSON.parse(made.stdout).Id as number
    t.match(made.stderr, new RegExp(`admin: the root admin key \\(Id ${service.admin.id}\\) holds the group`))
    const granted = await adminOn(service, 'acl', 'add', '--path', '/Api/Read/Acl', '--name', 'Operators ACL read', '--group', String(group), '--json')
    t.equal(granted.code, 0, granted.stderr)
    // Without Redis the service sees the CLI's change within 5 s.
    const assignable = async () => ((await service.call('GET', '/Api/Read/Groups')).json as { Id: number }[]).some((entry) => entry.Id === group)
    const deadline = Date.now() + 15_000
    while (!(await assignable()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200))
    t.ok(await assignable(), 'GET /Api/Read/Groups lists it')
    const created = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Operator group holder', GroupId: group, Require_Https: 0 } })
    t.equal(created.status, 200, created.text)
    const key = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200, "the group's entry lets the new key in")
    t.equal((await service.call('GET', '/Api/Read/Limits', { key })).status, 403, 'and nothing else')
  }),
)

t.test('the name rule the CLI shares with the API (kernel/http/nameRule.ts)', async (t) => {
  t.equal(nameProblem('Lobby screens \u00e9\u{1F600}'), null)
  t.equal(nameProblem('\u{1F600}'.repeat(255)), null, 'counted in code points')
  t.equal(nameProblem('K'.repeat(256)), 'must be at most 255 characters long')
  t.equal(nameProblem('P'.repeat(101), 100), 'must be at most 100 characters long')
  for (const name of ['Tab\there', 'line\n', 'C1\u0085here', 'DEL\u007f', 'nul\u0000']) t.equal(nameProblem(name), 'must not contain control characters', JSON.stringify(name))
  for (const name of ['Acme ', ' Acme', 'Acme\u00a0', '\u3000Acme']) t.equal(nameProblem(name), 'must not start or end with white space', JSON.stringify(name))
  t.equal(nameProblem('\u200b'), 'must contain a visible character')
  t.equal(nameProblem('\ud800x'), 'is not valid Unicode text')
})

t.test("names given to the CLI keep the API's name rule, the same on both databases", (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const { db } = service.kernel.database
    const tables = async () => ({
      keys: (await db.selectFrom('api_keys').select('display_name').orderBy('id').execute()).map((row) => row.display_name),
      groups: (await db.selectFrom('api_groups').select('display_name').orderBy('id').execute()).map((row) => row.display_name),
      acl: (await db.selectFrom('api_acl').select('display_name').orderBy('id').execute()).map((row) => row.display_name),
      players: (await db.selectFrom('tenant_players').select('name').execute()).map((row) => row.name),
    })
    const taken = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Acme', GroupId: 3, Require_Https: 0 } })
    t.equal(taken.status, 200, taken.text)
    const before = await tables()
    const bootstrap = (name: string) => ['key', 'bootstrap', '--parent', '1', '--custno', '0', '--name', name]
    const refusals: [string[], string][] = [
      // Before, SQLite stored 'Acme ' beside 'Acme' while MariaDB (PAD SPACE) called it taken: the move to MariaDB failed.
      [bootstrap('Acme '), '--name must not start or end with white space'],
      [bootstrap('Acme'), "Display Name 'Acme' is already defined for parent 1"],
      [bootstrap('Tab\there'), '--name must not contain control characters'],
      // Before, SQLite stored these and MariaDB answered its raw "Data too long for column".
      [['group', 'add', '--name', 'G'.repeat(256)], '--name must be at most 255 characters long'],
      [['acl', 'add', '--path', '/Probe/Read/Name', '--name', 'N'.repeat(256)], '--name must be at most 255 characters long'],
      [['acl', 'add', '--path', `/${'p'.repeat(255)}`, '--name', 'probe'], `--path /${'p'.repeat(255)}: an ACL path is at most 255 characters long`],
      [['player', 'add', '--parent', '1', '--custno', '5', '--name', 'tab\tx', '--location', 'Hall'], '--name must not contain control characters'],
    ]
    // Each run is a process start: side by side.
    const runs = await Promise.all(refusals.map(([words]) => adminOn(service, ...words)))
    runs.forEach((run, index) => {
      const [words, message] = refusals[index]
      t.equal(run.code, 2, `${JSON.stringify(words).slice(0, 80)}: a usage error`)
      t.equal(run.stderr.split('\n').find((line) => line.startsWith('admin: ')), `admin: ${message}`, 'naming the rule, never the database')
    })
    t.same(await tables(), before, 'nothing was written')

    // The longest name is counted in characters (code points) on both: 255 emoji fit.
    const longest = '\u{1F600}'.repeat(255)
    const made = await adminOn(service, ...bootstrap(longest), '--json')
    t.equal(made.code, 0, made.stderr)
    const issued = JSON.parse(made.stdout)
    const key = { id: issued.Id, apiKey: issued.Api_Key, secret: issued.Api_Secret }
    const again = await service.call('POST', '/Api/Create/Key', { key, today: true, body: { Display_Name: longest, GroupId: 3, Require_Https: 0 } })
    t.equal(again.text, `Error: Display Name '${longest}' is already defined.`, 'and the API finds it taken under the same name')
  }),
)

t.test('no CLI command puts a key in parent 0, where the installation keeps its audit records', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const { db } = service.kernel.database
    const refusals: [string[], string][] = [
      [['key', 'bootstrap', '--parent', '0', '--custno', '0', '--name', 'Zero admin'], 'key bootstrap'],
      [['key', 'bootstrap', '--parent', '00', '--custno', '3', '--name', 'Zero customer'], 'key bootstrap'],
      [['player', 'add', '--parent', '0', '--custno', '0', '--name', 'Zero lobby'], 'player add'],
      [['tenant', 'set', '--parent', '0', '--custno', '0', '--max-keys', '5'], 'tenant set'],
    ]
    const runs = await Promise.all(refusals.map(([words]) => adminOn(service, ...words)))
    runs.forEach((run, index) => {
      const [words, command] = refusals[index]
      t.equal(run.code, 2, `${words.join(' ')}: a usage error`)
      t.equal(run.stderr.split('\n').find((line) => line.startsWith('admin: ')),
        `admin: ${command}: --parent 0 is the installation's own (tenant 0/0 holds its audit records, which no key may read); give a Parent of 1 or more`)
    })
    t.same(await db.selectFrom('api_keys').select('id').where('parent', '=', 0).execute(), [], 'no key in parent 0')
    t.same(await db.selectFrom('tenant_entitlements').select('parent').where('parent', '=', 0).execute(), [], 'no entitlement for it')
    t.same(await db.selectFrom('api_audit').select('action').where('parent', '=', 0).where('action', 'in', ['key.create', 'player.add', 'tenant.set']).execute(), [], 'nothing audited')
    const shown = await adminOn(service, 'tenant', 'show', '--parent', '0', '--custno', '0', '--json')
    t.equal(shown.code, 0, 'tenant show may still look at parent 0 (keys an earlier version put there)')
    t.match(JSON.parse(shown.stdout), { Parent: 0, Custno: 0, Keys: 0 })
  }),
)

t.test("player add names what took the player's key name: a player, or an ordinary key", (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const squatter = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Player 5/Lobby', GroupId: 3, Require_Https: 0 } })
    t.equal(squatter.status, 200, squatter.text)
    const [clash, made] = await Promise.all([
      adminOn(service, 'player', 'add', '--parent', '1', '--custno', '5', '--name', 'Lobby'),
      adminOn(service, 'player', 'add', '--parent', '1', '--custno', '5', '--name', 'Hall', '--json'),
    ])
    t.equal(clash.code, 2)
    t.equal(clash.stderr.split('\n').find((line) => line.startsWith('admin: ')),
      `admin: a key named 'Player 5/Lobby' (Id ${squatter.json.Id}, not a player's) exists already in parent 1: rename that key (POST /Api/Edit/Key) or give the player another name`,
      'not "a player exists": there is none')
    t.equal(made.code, 0, made.stderr)
    const again = await adminOn(service, 'player', 'add', '--parent', '1', '--custno', '5', '--name', 'Hall')
    t.equal(again.code, 2)
    t.equal(again.stderr.split('\n').find((line) => line.startsWith('admin: ')), "admin: a player named 'Hall' exists already for 1/5")
    const players = await service.kernel.database.db.selectFrom('tenant_players').select('name').execute()
    t.same(players.map((row) => row.name), ['Hall'], 'one player; nothing written for the refused ones')
  }),
)

t.test('a stray word is a usage error (exit 2) that changes nothing, not silently dropped', async (t) => {
  const dataDir = tempDir(t)
  const env = { DATA_DIR: dataDir }
  t.equal((await runAdmin(['key', 'list'], env)).code, 0, 'the database exists')
  const strays: [string[], string][] = [
    [['key', 'list', '5'], "admin: key list: unexpected word '5' (options start with --)"],
    [['key', 'bootstrap', 'parent', '7', '--parent', '7', '--custno', '1', '--name', 'Stray'], "admin: key bootstrap: unexpected word 'parent' (options start with --)"],
    [['group', 'add', 'Extra', '--name', 'Extra'], "admin: group add: unexpected word 'Extra' (options start with --)"],
    [['acl', 'add', 'x', '--path', '/Extra/Read/Thing', '--name', 'extra'], "admin: acl add: unexpected word 'x' (options start with --)"],
    [['acl', 'list', 'all'], "admin: acl list: unexpected word 'all' (options start with --)"],
    [['daycode', 'now'], "admin: daycode: unexpected word 'now' (options start with --)"],
    [['tenant', 'set', 'max-keys', '--parent', '7', '--custno', '1', '--max-keys', '5'], "admin: tenant set: unexpected word 'max-keys' (options start with --)"],
    [['player', 'add', 'Lobby', '--parent', '7', '--custno', '1', '--name', 'Lobby'], "admin: player add: unexpected word 'Lobby' (options start with --)"],
    [['master-key', 'rotate', 'now'], 'admin: usage: master-key rotate'],
    [['master-key'], 'admin: usage: master-key rotate'],
  ]
  for (const [words, message] of strays) {
    const run = await runAdmin(words, env)
    t.equal(run.code, 2, `${words.join(' ')}: exit 2`)
    t.equal(run.stderr.split('\n').find((line) => line.startsWith('admin: ')), message)
  }
  const keys = JSON.parse((await runAdmin(['key', 'list', '--json'], env)).stdout)
  t.same(keys.map((key: { Id: number }) => key.Id), [1], 'no key was made')
  const groups = JSON.parse((await runAdmin(['group', 'list', '--json'], env)).stdout)
  t.notOk(groups.some((group: { Display_Name: string }) => group.Display_Name === 'Extra'), 'no group was made')
  const entries = JSON.parse((await runAdmin(['acl', 'list', '--json'], env)).stdout)
  t.notOk(entries.some((entry: { Path: string }) => entry.Path === '/Extra/Read/Thing'), 'no ACL entry was made')
})

t.test('--json is a global option: it may come before the command too (D10)', async (t) => {
  const dataDir = tempDir(t)
  const made = await runAdmin(['--json', 'key', 'bootstrap', '--parent', '7', '--custno', '0', '--name', 'json first'], { DATA_DIR: dataDir })
  t.equal(made.code, 0, made.stderr)
  t.same(Object.keys(JSON.parse(made.stdout)), ['Id', 'Api_Key', 'Api_Secret'], 'key bootstrap --json prints {"Id","Api_Key","Api_Secret"}')
  const listed = await runAdmin(['--json', 'key', 'list'], { DATA_DIR: dataDir })
  t.equal(listed.code, 0, listed.stderr)
  t.same(JSON.parse(listed.stdout).map((key: { Name: string }) => key.Name), ['Root administrator', 'json first'])
  const code = await runAdmin(['--json', 'daycode'], { DATA_DIR: dataDir })
  t.match(JSON.parse(code.stdout), /^\d{8}$/)
})

t.test('key list --parent/--custno lists that tenant only; an option a key subcommand does not take is refused', async (t) => {
  const dataDir = tempDir(t)
  t.equal((await runAdmin(['key', 'bootstrap', '--parent', '7', '--custno', '3', '--name', 'seven three'], { DATA_DIR: dataDir })).code, 0)
  t.equal((await runAdmin(['key', 'bootstrap', '--parent', '7', '--custno', '4', '--name', 'seven four'], { DATA_DIR: dataDir })).code, 0)
  const names = async (...words: string[]) => JSON.parse((await runAdmin(['key', 'list', ...words, '--json'], { DATA_DIR: dataDir })).stdout).map((key: { Name: string }) => key.Name)
  t.same(await names(), ['Root administrator', 'seven three', 'seven four'])
  t.same(await names('--parent', '7'), ['seven three', 'seven four'], 'not every tenant\'s keys')
  t.same(await names('--parent', '7', '--custno', '4'), ['seven four'])
  const shown = await runAdmin(['key', 'show', '2', '--parent', '7'], { DATA_DIR: dataDir })
  t.equal(shown.code, 2)
  t.match(shown.stderr, 'admin: key show: --parent and --custno are not options of it')
})

t.test("the service's warnings come on the CLI's stderr as lines for a person, not the log's JSON", async (t) => {
  const dataDir = tempDir(t)
  const port = await freePort()
  // Nothing listens there: the kernel the CLI starts says Redis is unreachable.
  const run = await runAdmin(['key', 'list'], { DATA_DIR: dataDir, REDIS_URL: `redis://:hunter2@127.0.0.1:${port}/0` })
  t.equal(run.code, 0, run.stderr)
  const lines = run.stderr.split('\n').filter((line) => line !== '')
  t.same(lines.filter((line) => line.startsWith('{')), [], 'no JSON log line')
  t.match(lines, [
    `keygate admin: SQLite ${join(dataDir, 'keygate.sqlite')}`,
    new RegExp(`^keygate: error: redis unreachable: rate limits are counted per process and cache changes are not shared until it returns \\(redis: redis://:\\*+@127\\.0\\.0\\.1:${port}/0\\)$`),
    /^admin: first start/,
  ])
  t.notMatch(run.stderr, 'hunter2', 'the password is not printed')
})
