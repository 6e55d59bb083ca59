/**
 * Issue 14.5: a SQLite installation moves to another database with `admin export` /
 * `admin import` and nothing is lost: the same key signs a call there and reads its old
 * log record; the day code stays. `admin backup` copies SQLite while 16 clients call.
 */
import { spawn } from 'node:child_process'
import { createConnection } from 'mysql2/promise'
import t, { type Test } from 'tap'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync, statSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import SQLite from 'better-sqlite3'
import { forEachDatabase, startService } from './helpers/service.ts'
import { createScratchDatabase } from './helpers/scratchDatabase.ts'
import { runAdmin } from './helpers/adminCli.ts'
import { groupNamed } from './helpers/keys.ts'
import { loadConfig } from '../kernel/boot/config.ts'
import { createKernel } from '../kernel/boot/kernel.ts'
import { signedHeaders, type SigningKey } from '../kernel/auth/signature.ts'
import { dayCodeAt } from '../kernel/auth/dayCode.ts'

/** A fresh, empty target: a new MariaDB database or nothing (SQLite lives in dataDir). */
async function emptyTarget(t: Test, kind: 'sqlite' | 'mysql'): Promise<string | undefined> {
  if (kind === 'sqlite') return undefined
  const scratch = await createScratchDatabase()
  t.teardown(() => scratch.drop())
  return scratch.url
}

function tempDir(t: Test, label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `keygate-${label}-`))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

t.test('export from SQLite, import into an empty database: the same key signs, reads its old log record, the day code stays', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const source = await startService(t, { kind: 'sqlite' })
    const aclReader = await groupNamed(source, 'Access list reader')
    const created = await source.call('POST', '/Api/Create/Key', { body: { Display_Name: 'moved', GroupId: [aclReader], Require_Https: 0 }, today: true })
    t.equal(created.status, 200, created.text)
    const call = await source.call('GET', '/Api/Read/Acl?format=json', { headers: { 'x-LogLevel': '2' } })
    t.equal(call.status, 200)
    const requestId = call.headers.get('x-requestid')!
    const sourceCode = source.today()
    // An uploaded photo lives in the database (people_photos, a blob), one written by an earlier version in the data folder.
    const uploadedImage = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(300_000, 7)])
    const pictured = (await source.call('POST', '/People/Update/OneChange', { body: { LastName: 'Pictured' } })).json as { Id: number }
    const uploaded = await source.call('POST', '/People/Update/OnePhoto', { body: { Id: pictured.Id, Image: uploadedImage.toString('base64') } })
    t.equal(uploaded.status, 200, uploaded.text)
    // Large images too: an import's insert must stay under MariaDB's max_allowed_packet (16 MiB).
    for (const fill of [1, 2, 3]) {
      const large = (await source.call('POST', '/People/Update/OneChange', { body: { LastName: `Large ${fill}` } })).json as { Id: number }
      const image = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff]), Buffer.alloc(4 * 1024 * 1024, fill)])
      t.equal((await source.call('POST', '/People/Update/OnePhoto', { body: { Id: large.Id, Image: image.toString('base64') } })).status, 200)
    }
    const photo = join(source.config.dataDir, 'photos', '1', '0', '7-abc.jpg')
    await import('node:fs/promises').then((fs) => fs.mkdir(join(source.config.dataDir, 'photos', '1', '0'), { recursive: true }))
    writeFileSync(photo, Buffer.from([0xff, 0xd8, 0xff, 0x00, 0x01]))
    await source.stop() // flushes the call log
    const file = join(tempDir(t, 'export'), 'keygate.jsonl')
    const exported = await runAdmin(['export'], { DATA_DIR: source.config.dataDir }, { stdoutFile: file })
    t.equal(exported.code, 0, exported.stderr)
    t.match(exported.stderr, /^keygate admin: SQLite .*keygate\.sqlite\n/, 'the database is named first, on stderr')
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line))
    t.equal(lines[0].format, 'keygate-export')
    t.ok(lines[0].tables.includes('people'), "a plugin's tables come along")
    t.notOk(lines[0].tables.includes('kernel_nodes'), 'not the registry of running processes')
    const keyLine = lines.find((line) => line.table === 'api_keys' && line.row.display_name === 'moved')
    t.match(keyLine.row.secret_enc, /^v1:/, 'secrets stay sealed')
    t.notOk(readFileSync(file, 'utf8').includes(source.admin.secret), 'no plaintext secret in the export')
    t.same(lines.at(-1).end, true)

    const targetDir = tempDir(t, 'target')
    const databaseUrl = await emptyTarget(t, kind)
    const env = { DATA_DIR: targetDir, DATABASE_URL: databaseUrl }
    const noKey = await runAdmin(['import'], env, { stdinFile: file })
    t.equal(noKey.code, 1)
    t.match(noKey.stderr, /admin: no master key here: copy the source's master.key to .*master\.key or set MASTER_KEY/)

    const wrongKey = await runAdmin(['import'], { ...env, MASTER_KEY: 'ab'.repeat(32) }, { stdinFile: file })
    t.equal(wrongKey.code, 1)
    t.match(wrongKey.stderr, /admin: the master key does not open the imported data: use the source's master key .*nothing was imported\n$/)

    const cut = join(tempDir(t, 'cut'), 'cut.jsonl')
    writeFileSync(cut, readFileSync(file, 'utf8').split('\n').slice(0, -2).join('\n') + '\n')
    copyFileSync(join(source.config.dataDir, 'master.key'), join(targetDir, 'master.key'))
    const cutOff = await runAdmin(['import'], env, { stdinFile: cut })
    t.equal(cutOff.code, 1)
    t.match(cutOff.stderr, /admin: the export ends early \(no end line\): it was cut off; nothing was imported/)
    if (databaseUrl) {
      // InnoDB keeps the ids a rolled-back insert took; the refused import gives them back.
      const connection = await createConnection({ uri: databaseUrl })
      const [status] = await connection.query("show table status like 'api_keys'")
      await connection.end()
      t.equal(Number((status as { Auto_increment: number }[])[0].Auto_increment), 1, 'the next key id is 1 again')
    }

    const imported = await runAdmin(['import', '--json'], env, { stdinFile: file })
    t.equal(imported.code, 0, imported.stderr)
    t.equal(JSON.parse(imported.stdout).Files, 1)
    t.same(readFileSync(join(targetDir, 'photos', '1', '0', '7-abc.jpg')), Buffer.from([0xff, 0xd8, 0xff, 0x00, 0x01]), 'the photo file came along')
    const again = await runAdmin(['import'], env, { stdinFile: file })
    t.equal(again.code, 1)
    t.match(again.stderr, /admin: this database is not empty \(table kernel_settings has rows\)/)

    const target = await createKernel({ config: loadConfig({ port: 0, dataDir: targetDir, databaseUrl: databaseUrl ?? null }, {}), report: () => undefined })
    t.teardown(() => target.close())
    t.equal(target.createdRootKey, null, 'no second first start: the imported root key stands')
    t.equal(existsSync(join(targetDir, 'admin-key.json')), false)
    t.equal(dayCodeAt(target.daySecret, Date.now()), sourceCode, 'the same day code')
    const { url } = await target.listen()
    const signed = async (key: SigningKey, method: string, path: string, body?: unknown, today?: string) => {
      const raw = body === undefined ? undefined : JSON.stringify(body)
      const headers: Record<string, string> = signedHeaders(key, method, path, raw, { today })
      if (raw) headers['content-type'] = 'application/json'
      const response = await fetch(url + path, { method, headers, body: raw })
      return { status: response.status, json: await response.json().catch(() => null) }
    }
    const old = await signed(source.admin, 'POST', '/Api/Read/Log', { LogRequestId: Number(requestId) })
    t.equal(old.status, 200, 'the same key signs a call on the new database')
    t.equal(old.json.Request_Method, 'GET')
    t.equal(old.json.Response_Code, 200, 'and reads its old log record')
    const moved = created.json as { Api_Key: string; Api_Secret: string }
    t.equal((await signed({ apiKey: moved.Api_Key, secret: moved.Api_Secret }, 'GET', '/Api/Read/Acl?format=json')).status, 200, 'the created key works there too, with its group')
    const next = await signed(source.admin, 'POST', '/Api/Create/Key', { Display_Name: 'after import', GroupId: [aclReader], Require_Https: 0 }, dayCodeAt(target.daySecret, Date.now()))
    t.equal(next.status, 200)
    t.ok(next.json.Id > (created.json as { Id: number }).Id, 'ids continue after the highest imported id')
    const photoPath = `/People/Read/Photo?Id=${pictured.Id}`
    const served = await fetch(url + photoPath, { headers: signedHeaders(source.admin, 'GET', photoPath) })
    t.equal(served.status, 200, 'the uploaded photo came along')
    t.same(Buffer.from(await served.arrayBuffer()), uploadedImage)
  }))

t.test('backup while 16 clients call: the copy opens and holds every key', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const aclReader = await groupNamed(service, 'Access list reader')
  for (let index = 0; index < 20; index++) {
    const made = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: `k${index}`, GroupId: [aclReader], Require_Https: 0 }, today: true })
    t.equal(made.status, 200)
  }
  let stop = false
  const statuses: number[] = []
  const clients = Array.from({ length: 16 }, async () => {
    while (!stop) statuses.push((await service.call('GET', '/Api/Read/Acl?format=json')).status)
  })
  await new Promise((resolve) => setTimeout(resolve, 200))
  const target = join(tempDir(t, 'backup'), 'copy.sqlite')
  const result = await runAdmin(['backup', target, '--json'], { DATA_DIR: service.config.dataDir })
  stop = true
  await Promise.all(clients)
  t.equal(result.code, 0, result.stderr)
  t.equal(JSON.parse(result.stdout).Keys, 21)
  t.equal(statSync(target).mode & 0o777, 0o600, 'owner only, like the database')
  t.same(readdirSync(dirname(target)), ['copy.sqlite'], 'one file: no -wal or -shm left beside it')
  t.ok(statuses.length >= 16)
  t.same([...new Set(statuses)], [200], 'every call was answered while the backup ran')
  const copy = new SQLite(target, { readonly: true })
  const copied = copy.prepare('select id, api_key, secret_enc from api_keys order by id').all()
  copy.close()
  const live = (await service.kernel.database.db.selectFrom('api_keys').select(['id', 'api_key', 'secret_enc']).orderBy('id').execute())
  t.same(copied, live, 'the copy holds every key')
  const twice = await runAdmin(['backup', target], { DATA_DIR: service.config.dataDir })
  t.equal(twice.code, 2)
  t.match(twice.stderr, /exists already; backup never overwrites a file/)
  const onMysql = await runAdmin(['backup', target], { DATA_DIR: service.config.dataDir, DATABASE_URL: 'mysql://u@127.0.0.1:1/x' })
  t.equal(onMysql.code, 2)
  t.match(onMysql.stderr, /keygate admin: MySQL u@127\.0\.0\.1:1\/x\nadmin: backup copies the SQLite database; for MySQL\/MariaDB use: mariadb-dump/)
})

t.test('a backup killed halfway leaves nothing named FILE, only its partial file; the next backup to FILE is made', async (t) => {
  const dataDir = tempDir(t, 'backup-killed')
  const first = await runAdmin(['daycode'], { DATA_DIR: dataDir })
  t.equal(first.code, 0, first.stderr)
  // A database big enough that the copy is still under way when it is killed.
  const database = new SQLite(join(dataDir, 'keygate.sqlite'))
  database.exec('create table bulk (b blob)')
  const insert = database.prepare('insert into bulk values (?)')
  const block = Buffer.alloc(1 << 20, 7)
  database.transaction(() => { for (let index = 0; index < 300; index++) insert.run(block) })()
  database.close()
  const folder = tempDir(t, 'backup-target')
  const target = join(folder, 'copy.sqlite')
  const { DATABASE_URL: _url, MASTER_KEY: _key, CONFIG_FILE: _file, ...environment } = process.env
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', 'backup', target], {
    env: { ...environment, DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let printed = ''
  child.stdout.on('data', (chunk) => (printed += chunk))
  const ended = new Promise<NodeJS.Signals | null>((resolve) => child.on('close', (_code, signal) => resolve(signal)))
  // Killed as soon as the copy has begun (its first file is in the folder).
  while (readdirSync(folder).length === 0) await new Promise((resolve) => setTimeout(resolve, 2))
  child.kill('SIGKILL')
  t.equal(await ended, 'SIGKILL')
  t.equal(printed, '', 'killed before the copy was done')
  t.notOk(existsSync(target), 'no cut-short file under the backup\'s name')
  t.ok(readdirSync(folder).every((name) => name.startsWith('copy.sqlite.partial-')), 'only the partial file, named as such')
  const again = await runAdmin(['backup', target, '--json'], { DATA_DIR: dataDir })
  t.equal(again.code, 0, again.stderr)
  t.equal(JSON.parse(again.stdout).Keys, 1)
  t.equal(statSync(target).mode & 0o777, 0o600)
  const missingFolder = await runAdmin(['backup', join(folder, 'no', 'copy.sqlite')], { DATA_DIR: dataDir })
  t.equal(missingFolder.code, 2)
  t.match(missingFolder.stderr, /admin: the folder .*\/no does not exist/)
})

// /dev/full (Linux, like the /proc the suite reads elsewhere) fails every write with ENOSPC.
t.test('export onto a full disk: one line naming it, exit 1, no stack trace', async (t) => {
  const dataDir = tempDir(t, 'export-full')
  const result = await runAdmin(['export'], { DATA_DIR: dataDir }, { stdoutFile: '/dev/full' })
  t.equal(result.code, 1)
  t.equal(result.stderr.split('\n').filter((line) => line && !line.startsWith('admin: first start')).join('\n'),
    `keygate admin: SQLite ${join(dataDir, 'keygate.sqlite')}\nadmin: the output could not be written: ENOSPC: no space left on device, write`)
})
