/**
 * Issue 15 / D16: three real service processes (`node kernel/boot/main.ts`) on loopback
 * ports over one MariaDB database and one Redis are one service: exact shared limits,
 * edits seen on the next call everywhere, unique ids, records readable through any
 * process, Redis outages survived, a killed process dropped from `servers`.
 * Outside CI without Redis or MariaDB these report skipped; in CI they fail.
 */
import t, { type Test } from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './helpers/freePort.ts'
import { createScratchDatabase, mysqlProblem, mysqlRequired, mysqlServerUrl } from './helpers/scratchDatabase.ts'
import { privateRedis, withRedis } from './helpers/redis.ts'
import { runAdmin } from './helpers/adminCli.ts'
import { signedHeaders, type SigningKey } from '../kernel/auth/signature.ts'
import { readAnswer, startService } from './helpers/service.ts'
import { sql, type Kysely } from 'kysely'

interface Node { port: number; base: string; child: ChildProcess; output: () => string }
interface Cluster {
  nodes: Node[]
  admin: SigningKey
  env: Record<string, string>
  today: string
  start(): Promise<Node>
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, limitMs = 30_000): Promise<void> {
  for (let waited = 0; !(await check()); waited += 100) {
    if (waited > limitMs) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** Three processes sharing one scratch MariaDB database, one data dir (master key) and `redisUrl`. */
async function cluster(t: Test, redisUrl: string, count = 3): Promise<Cluster> {
  const scratch = await createScratchDatabase()
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-redis-'))
  // A short node expiry, so a killed process leaves `servers` within the test.
  const configFile = join(dataDir, 'config.json')
  writeFileSync(configFile, JSON.stringify({ nodes: { heartbeatMs: 1000, expireMs: 4000 } }))
  const env: Record<string, string> = { DATA_DIR: dataDir, DATABASE_URL: scratch.url, REDIS_URL: redisUrl, CONFIG_FILE: configFile, LOG_ACCESS: 'none' }
  const nodes: Node[] = []
  const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null
  t.teardown(async () => {
    const exits = nodes.filter((node) => running(node.child)).map((node) => new Promise((resolve) => node.child.once('exit', resolve)))
    for (const node of nodes) if (running(node.child)) node.child.kill('SIGKILL')
    await Promise.all(exits)
    rmSync(dataDir, { recursive: true, force: true })
    await scratch.drop()
  })
  const start = async (): Promise<Node> => {
    const port = await freePort()
    const childEnv = { ...process.env, ...env, PORT: String(port) } as NodeJS.ProcessEnv
    delete childEnv.WORKERS
    const child = spawn(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout!.on('data', (chunk) => (output += chunk))
    child.stderr!.on('data', (chunk) => (output += chunk))
    const node = { port, base: `http://127.0.0.1:${port}/v1.0`, child, output: () => output }
    nodes.push(node)
    await waitFor(`process on ${port} to listen (${output})`, () => output.includes('keygate listening') || child.exitCode !== null)
    if (child.exitCode !== null) throw new Error(`process exited: ${output}`)
    return node
  }
  // The first start creates the root key; the others start on the existing installation.
  await start()
  for (let index = 1; index < count; index++) await start()
  const stored = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
  const admin: SigningKey = { apiKey: stored.Api_Key, secret: stored.Api_Secret }
  const daycode = await runAdmin(['daycode'], env)
  return { nodes, admin, env, today: daycode.stdout.trim(), start }
}

/** A signed call on a new connection to one process. */
async function call(node: Node, key: SigningKey, method: string, path: string, body?: unknown, today?: string) {
  const raw = body === undefined ? undefined : JSON.stringify(body)
  const headers: Record<string, string> = { ...signedHeaders(key, method, path, raw, { today, date: new Date().toISOString() }), connection: 'close' }
  if (raw !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(node.base + path, { method, headers, body: raw })
  return readAnswer(response)
}

async function createKey(c: Cluster, fields: Record<string, unknown> = {}) {
  const groups = (await call(c.nodes[0], c.admin, 'GET', '/Api/Read/Groups')).json as { Id: number; Paths: string[] }[]
  const created = await call(c.nodes[0], c.admin, 'POST', '/Api/Create/Key', { Display_Name: `k${Math.random()}`, GroupId: groups.map((group) => group.Id), Require_Https: 0, ...fields }, c.today)
  if (created.status !== 200) throw new Error(`create key: ${created.status} ${created.text}`)
  return { id: created.json.Id as number, key: { apiKey: created.json.Api_Key, secret: created.json.Api_Secret } as SigningKey, groups }
}

async function countStatuses(calls: Promise<{ status: number }>[]): Promise<Record<number, number>> {
  const counts: Record<number, number> = {}
  for (const answer of await Promise.all(calls)) counts[answer.status] = (counts[answer.status] ?? 0) + 1
  return counts
}

async function mysqlOr(t: Test): Promise<boolean> {
  const problem = await mysqlProblem()
  if (problem === null) return true
  if (mysqlRequired) t.fail(`MariaDB at ${mysqlServerUrl} is required here (CI) but not reachable: ${problem}`)
  else await t.test('mysql', { skip: `MariaDB at ${mysqlServerUrl} is not reachable (${problem})` }, async () => {})
  return false
}

t.test('three processes over MariaDB + Redis are one service', async (t) => {
  if (!(await mysqlOr(t))) return
  await withRedis(t, 'shared Redis', async (t, redisUrl) => {
    const c = await cluster(t, redisUrl)
    const [a, b, cc] = c.nodes

    await t.test('a 10/1Min key called 60 times at once over three processes gets exactly 10 answers of 200', async (t) => {
      const { key } = await createKey(c, { MaxHits: '10/1Min' })
      const counts = await countStatuses(Array.from({ length: 60 }, (_, index) => call(c.nodes[index % 3], key, 'GET', '/Api/Read/Acl')))
      t.same(counts, { 200: 10, 429: 50 })
    })

    await t.test('60 wrong day codes at once over three processes: exactly ten are judged, the rest wait out the minute', async (t) => {
      const { key } = await createKey(c, { DayPass: 1 })
      // Right codes never count, however many come at once: a DayPass key sends one on every call.
      const right = await countStatuses(Array.from({ length: 60 }, (_, index) => call(c.nodes[index % 3], key, 'GET', '/Api/Read/Acl', undefined, c.today)))
      t.same(right, { 200: 60 })
      const wrong = String((Number(c.today) + 1) % 100_000_000).padStart(8, '0')
      const counts = await countStatuses(Array.from({ length: 60 }, (_, index) => call(c.nodes[index % 3], key, 'GET', '/Api/Read/Acl', undefined, wrong)))
      t.same(counts, { 401: 10, 429: 50 }, 'counted before compared, in one Redis step')
      t.equal((await call(b, key, 'GET', '/Api/Read/Acl', undefined, c.today)).status, 429, 'the right code waits too')
    })

    await t.test('a key edited through A is refused on B and C at the very next call', async (t) => {
      const { id, key, groups } = await createKey(c)
      for (const node of c.nodes) t.equal((await call(node, key, 'GET', '/Api/Read/Acl')).status, 200, 'loaded and cached on every process')
      const withoutAcl = groups.find((group) => !group.Paths.includes('/Api/Read/Acl'))!
      const edited = await call(a, c.admin, 'POST', '/Api/Edit/Key', { KeyId: id, GroupId: [withoutAcl.Id] }, c.today)
      t.equal(edited.status, 200)
      t.equal((await call(b, key, 'GET', '/Api/Read/Acl')).status, 403, 'B sees the edit')
      t.equal((await call(cc, key, 'GET', '/Api/Read/Acl')).status, 403, 'C sees the edit')
      const disabled = await call(b, c.admin, 'POST', '/Api/Edit/Key', { KeyId: id, GroupId: groups.map((group) => group.Id) }, c.today)
      t.equal(disabled.status, 200)
      t.equal((await call(a, key, 'GET', '/Api/Read/Acl')).status, 200, 'an edit through B reaches A')
      t.equal((await call(cc, key, 'GET', '/Api/Read/Acl')).status, 200, 'and C')
    })

    await t.test('an edit one process cannot acknowledge (its link hung) also moves the database stamp', async (t) => {
      const { id } = await createKey(c)
      const { createConnection } = await import('mysql2/promise')
      const connection = await createConnection(c.env.DATABASE_URL)
      t.teardown(() => connection.end())
      const stamp = async () => ((await connection.query("select value from kernel_settings where name = 'access_changed'"))[0] as { value: string }[])[0]?.value
      const before = await stamp()
      // Stopped, C keeps its sockets open: Redis counts it a receiver, but it never acknowledges.
      cc.child.kill('SIGSTOP')
      try {
        t.equal((await call(a, c.admin, 'POST', '/Api/Edit/Key', { KeyId: id, Email: 'hung@example.com' }, c.today)).status, 200)
        await waitFor('the stamp to move', async () => (await stamp()) !== before, 5_000)
      } finally {
        cc.child.kill('SIGCONT')
      }
    })

    await t.test('an operator ACL change (CLI) is seen by all three', async (t) => {
      const { key } = await createKey(c)
      for (const node of c.nodes) t.equal((await call(node, key, 'GET', '/Api/Read/Limits')).status, 200, 'cached on every process')
      const listed = await runAdmin(['acl', 'list'], c.env)
      t.equal(listed.code, 0, listed.stderr)
      const line = listed.stdout.split('\n').find((row) => /\/Api\/Read\/Limits(\s|$)/.test(row))
      const id = /(?:^|\s)[Ii]d=(\d+)/.exec(line ?? '')?.[1]
      t.ok(id, `the ACL entry of /Api/Read/Limits is listed (${line})`)
      const removed = await runAdmin(['acl', 'remove', id!], { ...c.env })
      t.equal(removed.code, 0, removed.stderr)
      for (const node of c.nodes) t.equal((await call(node, key, 'GET', '/Api/Read/Limits')).status, 403, `refused on :${node.port}`)
    })

    await t.test('a people change drops the cached listings on all three', async (t) => {
      const before = await Promise.all(c.nodes.map((node) => call(node, c.admin, 'GET', '/People/Read/Missing')))
      for (const answer of before) t.equal(answer.status, 200, answer.text)
      const total = before[0].json.Total
      for (const answer of before) t.equal(answer.json.Total, total, 'the same listing everywhere (now cached)')
      const added = await call(a, c.admin, 'POST', '/People/Update/OneChange', { FirstName: 'Ada', LastName: 'Shared' })
      t.equal(added.status, 200, added.text)
      for (const node of [b, cc]) t.equal((await call(node, c.admin, 'GET', '/People/Read/Missing')).json.Total, total + 1, `:${node.port} shows the new person`)
    })

    await t.test('a write replayed on another process is refused: the replay memory is shared', async (t) => {
      const raw = JSON.stringify({ FirstName: 'Rex', LastName: 'Replay' })
      const headers = { ...signedHeaders(c.admin, 'POST', '/People/Update/OneChange', raw, { date: new Date().toISOString() }), 'content-type': 'application/json', connection: 'close' }
      const send = async (node: Node) => {
        const response = await fetch(node.base + '/People/Update/OneChange', { method: 'POST', headers, body: raw })
        return { status: response.status, text: await response.text() }
      }
      t.equal((await send(a)).status, 200, 'the first use')
      t.same(await send(b), { status: 401, text: 'Error: This request was already used (replay).' }, 'the same signed request on B')
      t.same(await send(cc), { status: 401, text: 'Error: This request was already used (replay).' }, 'and on C')
    })

    await t.test('request ids never collide across three processes; every record is readable through another', async (t) => {
      // The 30,000 calls, spread round-robin over the three.
      const total = 30_000
      const ids: { id: number; node: number }[] = []
      let next = 0
      const worker = async () => {
        while (next < total) {
          const index = next++
          const answer = await call(c.nodes[index % 3], c.admin, 'GET', '/Api/Read/Acl')
          if (answer.status !== 200) t.fail(`call ${index}: ${answer.status} ${answer.text}`)
          ids.push({ id: Number(answer.headers.get('x-requestid')), node: index % 3 })
        }
      }
      await Promise.all(Array.from({ length: 30 }, worker))
      t.equal(new Set(ids.map((made) => made.id)).size, total, 'all ids distinct')
      let unread = 0
      for (const made of ids.slice(0, 300)) {
        const read = await call(c.nodes[(made.node + 1) % 3], c.admin, 'POST', '/Api/Read/Log', { LogRequestId: made.id })
        if (read.status !== 200) unread++
      }
      t.equal(unread, 0, 'each of 300 records read at once through another process')
    })

    await t.test('a call answered by one process is in the history read through another at once', async (t) => {
      const { key } = await createKey(c)
      let missing = 0
      for (let round = 0; round < 10; round++) {
        const made = await call(a, key, 'GET', '/Api/Read/Acl')
        const history = await call(b, key, 'POST', '/Api/Read/History', {})
        if (!history.json.Calls.some((item: { Id: number }) => item.Id === Number(made.headers.get('x-requestid')))) missing++
      }
      t.equal(missing, 0, 'each of 10 calls listed at once by another process')
    })

    await t.test('one process SIGKILLed mid-load: the others keep answering and it leaves servers', async (t) => {
      const victim = cc
      const load = Array.from({ length: 60 }, async (_, index) => {
        if (index === 20) victim.child.kill('SIGKILL')
        return call(c.nodes[index % 2], c.admin, 'GET', '/Api/Read/Acl')
      })
      t.same(await countStatuses(load), { 200: 60 }, 'A and B answered every call')
      const servers = async () => (await call(a, c.admin, 'GET', '/Api/Read/Servers')).json as { Server_Port: number }[]
      await waitFor('the killed process to leave servers', async () => !(await servers()).some((server) => server.Server_Port === victim.port), 30_000)
      t.same((await servers()).map((server) => server.Server_Port).sort(), [a.port, b.port].sort())
    })
  })
})

t.test('Redis stopped mid-load then started again: no 5xx, per-process limits meanwhile, shared again after', async (t) => {
  if (!(await mysqlOr(t))) return
  const redis = await privateRedis(t, await freePort())
  const c = await cluster(t, redis.url)
  const readyz = (node: Node) => fetch(`http://127.0.0.1:${node.port}/readyz`, { headers: { connection: 'close' } })

  const first = await createKey(c, { MaxHits: '10/1Min' })
  t.same(await countStatuses(Array.from({ length: 30 }, (_, index) => call(c.nodes[index % 3], first.key, 'GET', '/Api/Read/Acl'))), { 200: 10, 429: 20 }, 'shared before')
  for (const node of c.nodes) t.equal((await readyz(node)).headers.get('keygate-degraded'), null, 'not degraded')

  // Stopped while calls are in flight: none of them may fail.
  const midLoad = Array.from({ length: 90 }, async (_, index) => {
    if (index === 30) await redis.stop()
    return call(c.nodes[index % 3], c.admin, 'GET', '/Api/Read/Acl')
  })
  t.same(await countStatuses(midLoad), { 200: 90 }, 'every call in flight around the stop answered 200')
  const during = await createKey(c, { MaxHits: '10/1Min' })
  const counts = await countStatuses(Array.from({ length: 60 }, (_, index) => call(c.nodes[index % 3], during.key, 'GET', '/Api/Read/Acl')))
  t.same(counts, { 200: 30, 429: 30 }, 'no 5xx; each process counts its own 10 meanwhile')
  for (const node of c.nodes) {
    const ready = await readyz(node)
    t.equal(ready.status, 200, 'still ready: it answers')
    t.equal(ready.headers.get('keygate-degraded'), 'redis unreachable; rate limits per process')
    t.equal(node.output().match(/redis unreachable/g)?.length, 1, 'said once in the service log')
  }
  // An operator's change cannot be published: it goes through the database's stamp, and the CLI says so.
  const disabled = await runAdmin(['key', 'disable', String(during.id)], c.env)
  t.equal(disabled.code, 0, disabled.stderr)
  t.match(disabled.stderr, /admin: Redis is unreachable: a running service sees this within 5 s \(through the database\)\n/)
  for (const node of c.nodes) {
    await waitFor('the disabled key refused while Redis is away', async () => (await call(node, during.key, 'GET', '/Api/Read/Acl')).status === 401, 10_000)
  }

  await redis.start()
  for (const node of c.nodes) await waitFor('the return to Redis', async () => (await readyz(node)).headers.get('keygate-degraded') === null, 20_000)
  const after = await createKey(c, { MaxHits: '10/1Min' })
  t.same(await countStatuses(Array.from({ length: 60 }, (_, index) => call(c.nodes[index % 3], after.key, 'GET', '/Api/Read/Acl'))), { 200: 10, 429: 50 }, 'shared again')
  for (const node of c.nodes) t.match(node.output(), /redis reachable again/)
})

t.test('Redis that stops answering but keeps its sockets open: calls and writes still answer, per process, then shared again', async (t) => {
  if (!(await mysqlOr(t))) return
  const redis = await privateRedis(t, await freePort())
  const c = await cluster(t, redis.url, 2)
  const [a, b] = c.nodes
  const readyz = (node: Node) => fetch(`http://127.0.0.1:${node.port}/readyz`, { headers: { connection: 'close' }, signal: AbortSignal.timeout(10_000) })
  /** A hung call fails the test (after 10 s) instead of hanging it. */
  const answered = <T>(pending: Promise<T>) => Promise.race([pending, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer within 10 s')), 10_000).unref())])
  const limited = await createKey(c, { MaxHits: '5/1Min' })
  t.teardown(() => redis.resume())

  redis.pause()
  // Each process learns within a second or two; no call waits on the paused Redis for long.
  t.same(await answered(countStatuses(Array.from({ length: 20 }, (_, index) => call(c.nodes[index % 2], limited.key, 'GET', '/Api/Read/Acl')))), { 200: 10, 429: 10 }, 'a rate-limited key: counted per process')
  const created = await answered(call(a, c.admin, 'POST', '/Api/Create/Key', { Display_Name: 'made while Redis hangs', GroupId: limited.groups.map((group) => group.Id), Require_Https: 0, MaxHits: '100/1Min' }, c.today))
  t.equal(created.status, 200, 'a write answers (its invalidation cannot wait for Redis)')
  t.equal((await answered(call(b, { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }, 'GET', '/Api/Read/Acl'))).status, 200, 'the new key works on the other process')
  for (const node of c.nodes) {
    await waitFor('readiness to say degraded', async () => (await readyz(node)).headers.get('keygate-degraded') === 'redis unreachable; rate limits per process', 10_000)
    t.match(node.output(), /redis unreachable/, 'said in the service log')
  }

  redis.resume()
  for (const node of c.nodes) await waitFor('the return to Redis', async () => (await readyz(node)).headers.get('keygate-degraded') === null, 20_000)
  const after = await createKey(c, { MaxHits: '5/1Min' })
  t.same(await countStatuses(Array.from({ length: 20 }, (_, index) => call(c.nodes[index % 2], after.key, 'GET', '/Api/Read/Acl'))), { 200: 5, 429: 15 }, 'shared again')
  for (const node of c.nodes) t.match(node.output(), /redis reachable again/)

  // Subscriptions cut (a blip, a Redis failover) while their command links stay up: an
  // edit published meanwhile reaches fewer processes than serve. B had the key loaded
  // and kept it for a minute; now the change reaches it within the stamp's 5 s.
  const warm = await createKey(c)
  t.equal((await call(b, warm.key, 'GET', '/Api/Read/Acl')).status, 200, 'loaded on B')
  const { Redis } = await import('ioredis')
  const operator = new Redis(redis.url)
  await operator.client('KILL', 'TYPE', 'pubsub')
  operator.disconnect()
  const ended = await call(a, c.admin, 'POST', '/Api/Edit/Key', { KeyId: warm.id, EndDate: new Date().toUTCString() }, c.today)
  t.equal(ended.status, 200)
  const started = Date.now()
  await waitFor('B to refuse the disabled key', async () => (await call(b, warm.key, 'GET', '/Api/Read/Acl')).status === 401, 8_000)
  t.ok(Date.now() - started < 8_000, 'within the stamp\'s 5 s (and a slow machine\'s margin)')
})

t.test('Redis unreachable at start: the process starts and answers, says so once, and moves to Redis when it comes', async (t) => {
  if (!(await mysqlOr(t))) return
  const redis = await privateRedis(t, await freePort(), false)
  const c = await cluster(t, redis.url, 2)
  const ready = await fetch(`http://127.0.0.1:${c.nodes[0].port}/readyz`)
  t.equal(ready.status, 200)
  t.equal(ready.headers.get('keygate-degraded'), 'redis unreachable; rate limits per process')
  const alone = await createKey(c, { MaxHits: '5/1Min' })
  t.same(await countStatuses(Array.from({ length: 20 }, (_, index) => call(c.nodes[index % 2], alone.key, 'GET', '/Api/Read/Acl'))), { 200: 10, 429: 10 }, 'five per process')
  for (const node of c.nodes) t.equal(node.output().match(/redis unreachable/g)?.length, 1, 'said once')

  await redis.start()
  for (const node of c.nodes) await waitFor('Redis', async () => (await fetch(`http://127.0.0.1:${node.port}/readyz`)).headers.get('keygate-degraded') === null, 20_000)
  const shared = await createKey(c, { MaxHits: '5/1Min' })
  t.same(await countStatuses(Array.from({ length: 20 }, (_, index) => call(c.nodes[index % 2], shared.key, 'GET', '/Api/Read/Acl'))), { 200: 5, 429: 15 }, 'shared once Redis is there')
  const plain = await createKey(c)
  t.equal((await call(c.nodes[1], plain.key, 'GET', '/Api/Read/Acl')).status, 200, 'loaded on B')
  const withoutAcl = plain.groups.find((group) => !group.Paths.includes('/Api/Read/Acl'))!
  t.equal((await call(c.nodes[0], c.admin, 'POST', '/Api/Edit/Key', { KeyId: plain.id, GroupId: [withoutAcl.Id] }, c.today)).status, 200)
  t.equal((await call(c.nodes[1], plain.key, 'GET', '/Api/Read/Acl')).status, 403, 'the subscription was made on reconnect: B sees an edit through A')
})

// The operator CLI makes a change and stops at once, without waiting for its spreading:
// when Redis did not reach every serving process (here one that serves without Redis),
// the publish's follow-up writes the database's stamp, and the stop waits for it before it
// closes the database ('driver has already been destroyed' lost it, and that process kept
// the removed key for its key cache's minute instead of the stamp's 5 s).
t.test('a change still being spread when the process stops still writes the stamp', async (t) => {
  if (!(await mysqlOr(t))) return
  await withRedis(t, 'shared Redis', async (t, redisUrl) => {
    const service = await startService(t, { kind: 'mysql', config: { redisUrl } })
    const db = service.kernel.services.db as unknown as Kysely<any>
    const stamp = async (on: Kysely<any>) => ((await sql<{ value: string }>`select value from kernel_settings where name = 'access_changed'`.execute(on)).rows[0])?.value
    const before = await stamp(db)
    // A process on another host, on the database but not on this Redis.
    const now = Date.now()
    await sql`insert into kernel_nodes (node_id, instance_token, server_name, server_addr, server_port, version, started, last_seen)
      values (${990_001}, 'elsewhere', 'keygate-elsewhere', '10.0.0.9', 8080, '0.0.0', ${now}, ${now + 60_000})`.execute(db)
    service.kernel.services.keys.changed(service.admin.id)
    const restarted = await service.restart()
    const after = await stamp(restarted.kernel.services.db as unknown as Kysely<any>)
    t.not(after, before, 'the stamp moved before the database closed')
    t.ok(after, 'and is there')
  })
})
