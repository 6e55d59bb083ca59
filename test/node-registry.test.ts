/**
 * Node ids claimed from the database (D16) and GET /Api/Read/Servers (D14): several
 * processes on one database each hold their own node id, request ids never collide,
 * a killed process vanishes from the list after the expiry and its id is reused.
 */
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { freePort } from './helpers/freePort.ts'
import { watchChild } from './helpers/childService.ts'
import { groupNamed, insertKey } from './helpers/keys.ts'
import { adminOn } from './helpers/adminCli.ts'
import { createKernel, type Kernel } from '../kernel/boot/kernel.ts'
import { loadConfig, type Config } from '../kernel/boot/config.ts'
import { withScratchMariadb } from './helpers/scratchDatabase.ts'
import { signedHeaders, type SigningKey } from '../kernel/auth/signature.ts'
import { nodeOfId, RequestIds } from '../kernel/callLog/requestId.ts'
import { NodeRegistry, followNodeId } from '../kernel/cluster/nodeRegistry.ts'
import { openDatabase } from '../kernel/storage/database.ts'
import { CallLog } from '../kernel/callLog/callLog.ts'

const repository = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const version = JSON.parse(readFileSync(join(repository, 'package.json'), 'utf8')).version as string
const httpDatePattern = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$/
const fields = ['Server_Name', 'Server_Addr', 'Server_Port', 'Node_Id', 'Started', 'Last_Seen', 'Version']
const quiet = () => undefined

/** A second kernel on the service's database (same SQLite file or MariaDB database, same master key). */
async function sibling(t: Test, service: Service, config: Partial<Config> = {}): Promise<{ kernel: Kernel; port: number; base: string }> {
  const kernel = await createKernel({ config: { ...service.config, port: 0, ...config }, report: quiet })
  t.teardown(() => kernel.close())
  const { port, url } = await kernel.listen()
  return { kernel, port, base: url }
}

async function signedCall(base: string, key: SigningKey, method: string, path: string, body?: unknown) {
  const raw = body === undefined ? undefined : JSON.stringify(body)
  const headers: Record<string, string> = signedHeaders(key, method, path, raw)
  if (raw !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(base + path, { method, headers, body: raw })
  const text = await response.text()
  return { status: response.status, headers: response.headers, text }
}

async function servers(service: Service): Promise<{ Node_Id: number; Server_Port: number; [field: string]: unknown }[]> {
  const answer = await service.call('GET', '/Api/Read/Servers')
  if (answer.status !== 200) throw new Error(`GET /Api/Read/Servers: ${answer.status} ${answer.text}`)
  return answer.json
}

t.test('two processes on one database: both listed, each its own node id, request ids never collide', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const other = await sibling(t, service)

    const listed = await service.call('GET', '/Api/Read/Servers')
    t.equal(listed.status, 200)
    t.match(listed.headers.get('content-type'), /^application\/json/)
    t.equal(listed.json.length, 2, 'both processes are live')
    for (const server of listed.json) {
      t.same(Object.keys(server), fields, 'the D14 fields, in order')
      t.equal(server.Server_Name, `keygate-${server.Node_Id}`, 'the default name carries the node id')
      t.equal(server.Server_Addr, '127.0.0.1')
      t.equal(server.Version, version)
      t.match(server.Started, httpDatePattern)
      t.match(server.Last_Seen, httpDatePattern)
      t.ok(Math.abs(Date.parse(server.Last_Seen) - Date.now()) < 60_000, 'Last_Seen is now')
    }
    t.same(listed.json.map((server: { Node_Id: number; Server_Port: number }) => [server.Node_Id, server.Server_Port]), [[0, service.port], [1, other.port]],
      'the first process claimed node id 0, the second 1, each with the port it listens on')

    // Calls on both at once: every id unique, each carrying its process's node id.
    const made = await Promise.all(Array.from({ length: 40 }, (_, index) =>
      index % 2 === 0
        ? service.call('GET', '/Api/Read/Acl').then((answer) => ({ node: 0, id: Number(answer.headers.get('x-requestid')) }))
        : signedCall(other.base, service.admin, 'GET', '/Api/Read/Acl').then((answer) => ({ node: 1, id: Number(answer.headers.get('x-requestid')) }))))
    t.equal(new Set(made.map((call) => call.id)).size, 40, 'no request id twice across the two processes')
    for (const call of made) t.equal(nodeOfId(call.id), call.node, `request id ${call.id} carries node id ${call.node}`)
    // Each record is readable through the other process (one database).
    const fromOther = made.find((call) => call.node === 1)!
    await other.kernel.close()
    const record = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: fromOther.id } })
    t.equal(record.status, 200, 'a record written by the other process is read through this one')
    t.equal(record.json.Server_Name, 'keygate-1', 'and names the process that answered')

    t.same((await servers(service)).map((server) => server.Node_Id), [0], 'a process that stopped cleanly leaves the list at once')
    const rows = await service.kernel.database.db.selectFrom('kernel_nodes').select('node_id').execute()
    t.same(rows.map((row) => Number(row.node_id)), [0], 'and gives its node id back')

    // A configured nodeId is honoured as given, and a serverName without {node} as written.
    const pinned = await sibling(t, service, { nodeId: 9, serverName: 'edge-a' })
    t.same((await servers(service)).map((server) => [server.Node_Id, server.Server_Name]), [[0, 'keygate-0'], [9, 'edge-a']])
    const pinnedCall = await signedCall(pinned.base, service.admin, 'GET', '/Api/Read/Acl')
    t.equal(nodeOfId(Number(pinnedCall.headers.get('x-requestid'))), 9)
    // The operator CLI runs on the same configuration but never listens: it leaves the id alone.
    const rowOf9 = () => service.kernel.database.db.selectFrom('kernel_nodes').selectAll().where('node_id', '=', 9).executeTakeFirstOrThrow()
    const before = await rowOf9()
    const reports: unknown[] = []
    const cli = await createKernel({ config: { ...service.config, port: 0, nodeId: 9 }, report: (error) => reports.push(error) })
    await cli.close()
    t.same(await rowOf9(), before, 'a kernel that never listens does not take a configured id')
    t.same(reports, [])
    await pinned.kernel.close()
  }),
)

t.test('more live processes than node ids: a clear start error, nothing left behind', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const { db } = service.kernel.database
    const now = Date.now()
    await db.insertInto('kernel_nodes').values(Array.from({ length: 15 }, (_, index) => ({
      node_id: index + 1, instance_token: `other-${index}`, server_name: 'elsewhere', server_addr: '10.0.0.1', server_port: 8080,
      version: version, started: now, last_seen: now + 3_600_000,
    }))).execute()
    await t.rejects(createKernel({ config: { ...service.config, port: 0 }, report: quiet }),
      { message: 'all 16 node ids are held by live processes on this database (seen in the last 30 s); stop one, or wait until a stopped one expires' })
    t.equal((await servers(service)).length, 16, 'the refused process holds no row')
    await db.deleteFrom('kernel_nodes').where('server_name', '=', 'elsewhere').execute()
  }),
)

t.test('a SIGKILLed process vanishes from the list after the expiry; its node id is then reused', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const nodes = { heartbeatMs: 200, expireMs: 3000 }
    const service = await startService(t, { kind, config: { nodes } })
    const folder = mkdtempSync(join(tmpdir(), 'keygate-nodes-'))
    t.teardown(() => rmSync(folder, { recursive: true, force: true }))
    const configFile = join(folder, 'config.json')
    writeFileSync(configFile, JSON.stringify({ nodes }))
    const port = await freePort()
    const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(port), DATA_DIR: service.config.dataDir, CONFIG_FILE: configFile }
    delete env.NODE_ID
    delete env.WORKERS
    if (service.config.databaseUrl) env.DATABASE_URL = service.config.databaseUrl
    else delete env.DATABASE_URL
    const child = spawn(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
    const { exited, waitFor } = watchChild(t, child)
    await waitFor('keygate listening')
    t.same((await servers(service)).map((server) => [server.Node_Id, server.Server_Port]), [[0, service.port], [1, port]], 'the spawned process claimed node id 1')

    const childBase = `http://127.0.0.1:${port}/v1.0`
    const childIds: number[] = []
    for (let index = 0; index < 5; index++) childIds.push(Number((await signedCall(childBase, service.admin, 'GET', '/Api/Read/Acl')).headers.get('x-requestid')))
    // History writes the queue out first: the records are in the database before the kill.
    t.equal((await signedCall(childBase, service.admin, 'POST', '/Api/Read/History', {})).status, 200)
    child.kill('SIGKILL')
    await exited

    const { db } = service.kernel.database
    const row = await db.selectFrom('kernel_nodes').select('node_id').where('node_id', '=', 1).executeTakeFirst()
    t.ok(row, 'a killed process could not give its id back: its row waits for the expiry')
    // Before the expiry the id is not free: a process started now takes another one.
    const early = await sibling(t, service, { nodes: { heartbeatMs: 10_000, expireMs: 60_000 } })
    const earlyRow = await db.selectFrom('kernel_nodes').select('node_id').where('server_port', '=', early.port).executeTakeFirstOrThrow()
    t.equal(Number(earlyRow.node_id), 2, 'the killed process is still within its expiry: a new one gets node id 2')
    await early.kernel.close()

    let live = await servers(service)
    for (let polls = 0; live.some((server) => server.Node_Id === 1) && polls < 200; polls++) {
      await new Promise((done) => setTimeout(done, 100))
      live = await servers(service)
    }
    t.same(live.map((server) => server.Node_Id), [0], 'the killed process vanished from the list')

    const successor = await sibling(t, service)
    const afterwards = await servers(service)
    t.same(afterwards.map((server) => [server.Node_Id, server.Server_Port]), [[0, service.port], [1, successor.port]], 'the expired node id 1 is reused')
    const next = Number((await signedCall(successor.base, service.admin, 'GET', '/Api/Read/Acl')).headers.get('x-requestid'))
    t.equal(nodeOfId(next), 1)
    t.ok(next > Math.max(...childIds), 'the reused node id continues after the last id its predecessor logged')
  }),
)

t.test('GET /Api/Read/Servers in xml and csv; only the admin default group has it', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const xml = await service.call('GET', '/Api/Read/Servers?format=xml')
    t.equal(xml.status, 200)
    t.match(xml.headers.get('content-type'), /^application\/xml/)
    t.match(xml.text, new RegExp(`^<\\?xml version="1.0" encoding="UTF-8"\\?>\\n<Servers>\\n    <Server>\\n        <Server_Name>keygate-0</Server_Name>\\n        <Server_Addr>127.0.0.1</Server_Addr>\\n        <Server_Port>${service.port}</Server_Port>\\n        <Node_Id>0</Node_Id>\\n        <Started>[^<]+ GMT</Started>\\n        <Last_Seen>[^<]+ GMT</Last_Seen>\\n        <Version>${version.replaceAll('.', '\\.')}</Version>\\n    </Server>\\n</Servers>$`))
    const csv = await service.call('GET', '/Api/Read/Servers', { headers: { accept: 'text/csv' } })
    t.equal(csv.status, 200)
    t.match(csv.headers.get('content-type'), /^text\/csv/)
    const lines = csv.text.split('\r\n')
    t.equal(lines.length, 2)
    t.equal(lines[0], fields.join(','))
    t.match(lines[1], new RegExp(`^keygate-0,127\\.0\\.0\\.1,${service.port},0,"[^"]+ GMT","[^"]+ GMT",${version.replaceAll('.', '\\.')}$`))

    // D14: "Its path is in the admin default group only": the group that allows key
    // creation, which no key may assign (D9), so the root key cannot pass it on.
    const group = await groupNamed(service, 'Key administration')
    const paths = await service.kernel.database.db.selectFrom('api_group_acl').innerJoin('api_acl', 'api_acl.id', 'api_group_acl.acl_id')
      .select('api_acl.path').where('api_acl.path', '=', '/Api/Read/Servers').execute()
    t.equal(paths.length, 1, 'one ACL entry has the path')
    const holders = await service.kernel.database.db.selectFrom('api_group_acl').innerJoin('api_acl', 'api_acl.id', 'api_group_acl.acl_id')
      .innerJoin('api_groups', 'api_groups.id', 'api_group_acl.group_id').select('api_groups.display_name').where('api_acl.path', '=', '/Api/Read/Servers').execute()
    t.same(holders.map((row) => row.display_name), ['Key administration'], 'in the admin default group only')
    t.notOk(await service.kernel.database.db.selectFrom('api_groups').select('id').where('display_name', '=', 'Service administration').executeTakeFirst(), 'no group of its own')
    const reader = await insertKey(service, {}, [await groupNamed(service, 'Access list reader')])
    const refused = await service.call('GET', '/Api/Read/Servers', { key: reader })
    t.equal(refused.status, 403)
    t.equal(refused.text, 'Error: Your ACL does not allow /Api/Read/Servers.')

    const assignable = (await service.call('GET', '/Api/Read/Groups')).json as { Id: number; Paths: string[] }[]
    t.notOk(assignable.some((item) => item.Id === group), 'not among the groups the root key may assign')
    t.notOk(assignable.some((item) => item.Paths.some((path) => path.toLowerCase() === '/api/read/servers')))
    const handedOn = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Servers reader', GroupId: group, Require_Https: 0 } })
    t.equal(handedOn.status, 400)
    t.equal(handedOn.text, `Error: GroupId ${group} is not a group you may assign (see GET /Api/Read/Groups).`)
    const everything = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'All it may', GroupId: assignable.map((item) => item.Id), Require_Https: 0 } })
    t.equal(everything.status, 200, everything.text)
    const child = { apiKey: everything.json.Api_Key, secret: everything.json.Api_Secret }
    t.equal((await service.call('GET', '/Api/Read/Servers', { key: child })).status, 403, 'a key with every assignable group')
  }),
)

// SQLite only: the CLI is a process start; the rule is the kernel's, shared with the API above.
t.test("a tenant admin from 'admin key bootstrap' gets the root key's groups, the admin group with the servers among them", async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const made = await adminOn(service, 'key', 'bootstrap', '--parent', '2', '--custno', '0', '--name', 'Tenant two', '--json')
  t.equal(made.code, 0, made.stderr)
  const tenantAdmin = JSON.parse(made.stdout) as { Id: number; Api_Key: string; Api_Secret: string }
  const rootGroups = (await service.kernel.services.keys.groupsOf(service.admin.id)).map((group) => group.Id)
  const adminGroups = (await service.kernel.services.keys.groupsOf(tenantAdmin.Id)).map((group) => group.Id)
  t.same(adminGroups, rootGroups)
  t.ok(adminGroups.includes(await groupNamed(service, 'Key administration')))
  const listed = await service.call('GET', '/Api/Read/Servers', { key: { apiKey: tenantAdmin.Api_Key, secret: tenantAdmin.Api_Secret } })
  t.equal(listed.status, 200, listed.text)
})

t.test('the registry: a takeover is noticed, the database going away is survived', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const { db } = service.kernel.database
  const reports: string[] = []
  const options = { nodeId: null, serverName: 'unit', host: '127.0.0.1', heartbeatMs: 60_000, expireMs: 30_000, report: (error: unknown) => reports.push((error as Error).message) }

  const stalled = await NodeRegistry.start(db, options)
  t.equal(stalled.nodeId, 1, 'the service holds 0')
  const requestIds = new RequestIds(stalled.nodeId)
  const callLog = new CallLog(db, service.config.log, Date.now, () => undefined, stalled.nodeId)
  followNodeId(stalled, requestIds, async () => 0, options.report, [callLog])
  // It could not renew its row for longer than the expiry, and a new process took its id.
  await db.updateTable('kernel_nodes').set({ last_seen: Date.now() - 60_000 }).where('node_id', '=', 1).execute()
  const successor = await NodeRegistry.start(db, options)
  t.equal(successor.nodeId, 1, 'the expired id is taken over')
  await stalled.heartbeat()
  t.equal(stalled.nodeId, 2, 'the stalled process noticed and claimed another id')
  t.equal(nodeOfId(requestIds.next()), 2, 'its request ids follow the new id')
  // A record the successor made a moment ago under node id 1, still in its queue: the
  // stalled process's reads wait for it as a sibling's (they took it for their own, 404).
  const made = await service.call('GET', '/Api/Read/Acl')
  const sourceId = Number(made.headers.get('x-requestid'))
  let source
  for (let waited = 0; !(source = await db.selectFrom('api_log').selectAll().where('id', '=', sourceId).executeTakeFirst()) && waited < 5000; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const successorsId = new RequestIds(1).next()
  const landing = new Promise((resolve) => setTimeout(resolve, 200)).then(() => db.insertInto('api_log').values({ ...source!, id: successorsId }).execute())
  t.ok(await callLog.find(successorsId, Number(source!.key_id)), "read through the process that held the successor's id before")
  await landing
  t.same(reports, ['node id 1 was taken over by another process (this one could not renew it in time, or the other was started with that nodeId); now node id 2'])
  await successor.heartbeat()
  t.equal(successor.nodeId, 1, 'the successor keeps its id')
  await stalled.release()
  await successor.release()

  // The database goes away under a heartbeat: reported once, no exception, it keeps trying.
  const separate = openDatabase({ databaseUrl: null, dataDir: service.config.dataDir })
  const cutOff = await NodeRegistry.start(separate.db, options)
  await separate.close()
  reports.length = 0
  await t.resolves(cutOff.heartbeat())
  await t.resolves(cutOff.heartbeat())
  t.equal(reports.length, 1, 'one report for the outage, not one per beat')
  await t.resolves(cutOff.release())
  await db.deleteFrom('kernel_nodes').where('server_name', '=', 'unit').execute()
})

t.test('a process started with a nodeId takes it from a live holder: the holder moves on, its report not blaming its own database link alone', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const { db } = service.kernel.database
  const reports: string[] = []
  const options = { nodeId: null, serverName: 'unit', host: '127.0.0.1', heartbeatMs: 60_000, expireMs: 30_000, report: (error: unknown) => reports.push((error as Error).message) }
  const holder = await NodeRegistry.start(db, options)
  t.equal(holder.nodeId, 1, 'the service holds 0')
  // It renews its row on time; another process is started with NODE_ID=1 and listens.
  await holder.heartbeat()
  const configured = await NodeRegistry.start(db, { ...options, nodeId: 1 })
  await configured.serving(await freePort())
  t.equal(configured.nodeId, 1, 'a configured id is taken whatever holds it')
  await holder.heartbeat()
  t.equal(holder.nodeId, 2, 'the holder noticed and claimed another id')
  t.match(reports, [
    /^nodeId 1 is configured here but also held by a live process/,
    /^node id 1 was taken over by another process \(this one could not renew it in time, or the other was started with that nodeId\); now node id 2$/,
  ])
  await holder.release()
  await configured.release()
})

t.test('WORKERS=2: each worker claims its own node id', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-workers-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const port = await freePort()
  const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(port), DATA_DIR: dataDir, WORKERS: '2' }
  for (const name of ['DATABASE_URL', 'CONFIG_FILE', 'NODE_ID']) delete env[name]
  const child = spawn(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
  const { exited, waitFor } = watchChild(t, child)
  await waitFor('2 workers')
  const stored = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
  const admin: SigningKey = { apiKey: stored.Api_Key, secret: stored.Api_Secret }
  const answer = await signedCall(`http://127.0.0.1:${port}/v1.0`, admin, 'GET', '/Api/Read/Servers')
  t.equal(answer.status, 200)
  const listed = JSON.parse(answer.text) as { Node_Id: number; Server_Port: number }[]
  t.same(listed.map((server) => [server.Node_Id, server.Server_Port]), [[0, port], [1, port]],
    'two workers on one port, node ids 0 and 1 (the primary gave back the id it held while it set the database up)')
  child.kill('SIGTERM')
  t.equal((await exited).code, 0)
})

t.test('three processes started together on an empty MariaDB database: one first start, all serving', (t) =>
  withScratchMariadb(t, async (databaseUrl) => {
    // Each its own data folder (as on several hosts), one master key.
    const masterKey = 'ab'.repeat(32)
    const starts = Array.from({ length: 3 }, () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'keygate-together-'))
      t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
      return createKernel({ config: loadConfig({ port: 0, dataDir, databaseUrl, masterKey }, {}), report: quiet })
    })
    const results = await Promise.allSettled(starts)
    const kernels = results.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []))
    t.teardown(() => Promise.all(kernels.map((kernel) => kernel.close())))
    t.same(results.map((result) => result.status === 'rejected' ? String(result.reason) : 'started'), ['started', 'started', 'started'])
    t.equal(kernels.filter((kernel) => kernel.createdRootKey !== null).length, 1, 'one root key')
    const { db } = kernels[0].database
    const groups = await db.selectFrom('api_groups').select('display_name').execute()
    t.equal(new Set(groups.map((group) => group.display_name)).size, groups.length, 'each default group once')
    const admin = await db.selectFrom('api_groups').select('id').where('display_name', '=', 'Key administration').executeTakeFirstOrThrow()
    const paths = await db.selectFrom('api_group_acl').innerJoin('api_acl', 'api_acl.id', 'api_group_acl.acl_id').select('api_acl.path').where('api_group_acl.group_id', '=', admin.id).execute()
    t.equal(paths.length, new Set(paths.map((row) => row.path)).size, 'no path twice in the admin group')
    t.ok(paths.some((row) => row.path === '/Api/Read/Servers'))
    const root = kernels.find((kernel) => kernel.createdRootKey !== null)!.createdRootKey!
    for (const kernel of kernels) {
      const { url } = await kernel.listen()
      const answer = await signedCall(url, { apiKey: root.apiKey, secret: root.secret }, 'GET', '/Api/Read/Acl')
      t.equal(answer.status, 200, 'every process serves the one root key')
    }
  }),
)
