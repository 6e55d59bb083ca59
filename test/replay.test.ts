/**
 * Replays and Idempotency-Key (issue 12): a captured signed write cannot be sent again
 * within its clock window; reads stay replayable; a retry with the same Idempotency-Key
 * and the same request gets the first answer without the work being done twice.
 */
import t from 'tap'
import { sql } from 'kysely'
import { signedHeaders } from '../kernel/auth/signature.ts'
import { forEachDatabase, readAnswer, startService, type CallOptions, type Service } from './helpers/service.ts'
import { insertKey } from './helpers/keys.ts'
import { privateRedis, withRedis } from './helpers/redis.ts'
import { freePort } from './helpers/freePort.ts'
import { PrivateMariadb } from './helpers/privateMariadb.ts'
import { createHash } from 'node:crypto'
import type { Test } from 'tap'
import { createKernel } from '../kernel/boot/kernel.ts'
import { defineRoute, type Plugin } from '../kernel/sdk.ts'
import { silentLogger } from '../kernel/observe/logger.ts'

/** Sends exactly these bytes and headers, as a captured request would be sent again. */
async function send(service: Service, method: string, path: string, headers: Record<string, string>, body?: string) {
  const response = await fetch(service.base + path, { method, headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' }, body })
  return { status: response.status, text: await response.text(), headers: response.headers }
}

/** A second process on the service's database (and Redis, if it has one), signing with the service's admin key. */
async function siblingOf(t: Test, service: Service, plugins: Plugin[] = []): Promise<Service> {
  const kernel = await createKernel({ config: { ...service.config, port: 0 }, plugins, report: () => undefined, logger: silentLogger() })
  t.teardown(() => kernel.close())
  const { url } = await kernel.listen()
  return { ...service, kernel, base: url, call: (method, path, options = {}) => callAt(url, service, method, path, options) }
}

let lastDateSent = 0

/** A signed call to `base` with the service's admin key, each dated a millisecond apart so calls sent at once are not replays of each other. */
async function callAt(base: string, service: Service, method: string, path: string, options: CallOptions) {
  const raw = options.rawBody?.toString() ?? (options.body === undefined ? undefined : JSON.stringify(options.body))
  const headers: Record<string, string> = { ...signedHeaders(service.admin, method, path, raw, { date: new Date((lastDateSent = Math.max(Date.now(), lastDateSent + 1))).toISOString() }), ...(options.headers ?? {}) }
  if (raw !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(base + path, { method, headers, body: raw })
  return readAnswer(response)
}

async function peopleCount(service: Service): Promise<number> {
  const db = service.kernel.database.db.withTables<{ people: { id: number } }>()
  const row = await db.selectFrom('people').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()
  return Number(row.n)
}

t.test('a replayed signed write is refused; reads stay replayable', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const body = JSON.stringify({ FirstName: 'Ada', LastName: 'Lovelace' })
    const captured = signedHeaders(service.admin, 'POST', '/People/Update/OneChange', body)
    const first = await send(service, 'POST', '/People/Update/OneChange', captured, body)
    t.equal(first.status, 200, first.text)
    const replayed = await send(service, 'POST', '/People/Update/OneChange', captured, body)
    t.equal(replayed.status, 401)
    t.equal(replayed.text, 'Error: This request was already used (replay).')
    t.match(replayed.headers.get('x-requestid'), /^\d+$/, 'the refused replay is logged under the key it names')
    t.equal(await peopleCount(service), 1, 'the replay made no second person')

    // The same write, signed anew (another date), is a new request.
    const again = await service.call('POST', '/People/Update/OneChange', { body: JSON.parse(body), date: new Date(Date.now() + 1000).toUTCString() })
    t.equal(again.status, 200)
    t.equal(await peopleCount(service), 2)

    // The signature is remembered per key: the same bytes signed by another key are that key's first use.
    const other = await insertKey(service)
    const otherHeaders = signedHeaders(other, 'POST', '/People/Update/OneChange', body, { date: captured['x-apidate'] })
    t.equal((await send(service, 'POST', '/People/Update/OneChange', otherHeaders, body)).status, 200)

    // A write's signature is good for one attempt, whatever refuses it after the signature
    // check (the replay check comes before credits, so a replay spends none): one the
    // schema refused, sent again, is a replay too.
    const bad = JSON.stringify({ FirstName: 'x'.repeat(300) })
    const badHeaders = signedHeaders(service.admin, 'POST', '/People/Update/OneChange', bad)
    t.equal((await send(service, 'POST', '/People/Update/OneChange', badHeaders, bad)).status, 400)
    t.equal((await send(service, 'POST', '/People/Update/OneChange', badHeaders, bad)).status, 401)
    t.equal(await peopleCount(service), 3)

    // Reads change nothing and stay replayable: a GET, and a POST read.
    const read = signedHeaders(service.admin, 'GET', '/Api/Read/Acl')
    t.equal((await send(service, 'GET', '/Api/Read/Acl', read)).status, 200)
    t.equal((await send(service, 'GET', '/Api/Read/Acl', read)).status, 200)
    const historyBody = JSON.stringify({})
    const history = signedHeaders(service.admin, 'POST', '/Api/Read/History', historyBody)
    t.equal((await send(service, 'POST', '/Api/Read/History', history, historyBody)).status, 200)
    t.equal((await send(service, 'POST', '/Api/Read/History', history, historyBody)).status, 200, 'POST /Api/Read/History is a read')

    // Key creation (day code) is a write like any other.
    const keyBody = JSON.stringify({ Display_Name: 'Replay target', GroupId: (await service.call('GET', '/Api/Read/Groups')).json[0].Id })
    const create = signedHeaders(service.admin, 'POST', '/Api/Create/Key', keyBody, { today: service.today() })
    t.equal((await send(service, 'POST', '/Api/Create/Key', create, keyBody)).status, 200)
    const createdAgain = await send(service, 'POST', '/Api/Create/Key', create, keyBody)
    t.equal(createdAgain.status, 401)
    t.equal(createdAgain.text, 'Error: This request was already used (replay).')
  }),
)

t.test('the replay memory lasts as long as the clock window, and no longer', async (t) => {
  let now = Date.now()
  const service = await startService(t, { kind: 'sqlite', clock: () => now })
  const body = JSON.stringify({ FirstName: 'Grace', LastName: 'Hopper' })
  const date = new Date(now).toUTCString()
  const captured = signedHeaders(service.admin, 'POST', '/People/Update/OneChange', body, { date })
  t.equal((await send(service, 'POST', '/People/Update/OneChange', captured, body)).status, 200)
  now += 4 * 60_000
  t.equal((await send(service, 'POST', '/People/Update/OneChange', captured, body)).status, 401, 'still inside the 5-minute window: a replay')
  now += 2 * 60_000
  const late = await send(service, 'POST', '/People/Update/OneChange', captured, body)
  t.equal(late.status, 401, 'outside the window the date itself refuses it')
  t.equal(late.text, 'Error: x-apidate is outside the allowed clock window.')
})

t.test('Idempotency-Key: the same request answers the stored answer; another request is 422', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const body = { FirstName: 'Katherine', LastName: 'Johnson' }
    const headers = { 'Idempotency-Key': 'order-7f3a' }
    const first = await service.call('POST', '/People/Update/OneChange', { body, headers })
    t.equal(first.status, 200, first.text)
    t.equal(first.headers.get('idempotent-replayed'), null)
    // A retry signs again (a new date), so it is no replay; the key makes it the same request.
    const retry = await service.call('POST', '/People/Update/OneChange', { body, headers, date: new Date(Date.now() + 1000).toUTCString() })
    t.equal(retry.status, 200)
    t.equal(retry.text, first.text, 'the first answer, byte for byte')
    t.equal(retry.headers.get('idempotent-replayed'), 'true')
    t.not(retry.headers.get('x-requestid'), first.headers.get('x-requestid'), 'the retry is a call of its own in the log')
    t.equal(await peopleCount(service), 1, 'the work was done once')

    // The same captured request with its key, sent again: the stored answer, no second person.
    const raw = JSON.stringify(body)
    const captured = { ...signedHeaders(service.admin, 'POST', '/People/Update/OneChange', raw, { date: new Date(Date.now() + 2000).toUTCString() }), ...headers }
    t.equal((await send(service, 'POST', '/People/Update/OneChange', captured, raw)).status, 200)
    t.equal(await peopleCount(service), 1)
    // The very same bytes once more are a replay, Idempotency-Key or not: a captured create
    // would otherwise get its stored answer, the new key's secret.
    const replayed = await send(service, 'POST', '/People/Update/OneChange', captured, raw)
    t.equal(replayed.status, 401)
    t.equal(replayed.text, 'Error: This request was already used (replay).')
    t.equal(replayed.headers.get('idempotent-replayed'), null)

    const other = await service.call('POST', '/People/Update/OneChange', { body: { ...body, FirstName: 'Dorothy' }, headers })
    t.equal(other.status, 422)
    t.equal(other.text, 'Error: This Idempotency-Key was already used with another request.')
    t.equal(await peopleCount(service), 1, 'the other request did nothing')

    // The stored answer is the JSON sent: a retry that asks for XML or CSV is another request, not JSON in their place.
    for (const [index, accept] of ['application/xml', 'text/csv'].entries()) {
      const otherFormat = await service.call('POST', '/People/Update/OneChange', { body, headers: { ...headers, Accept: accept }, date: new Date(Date.now() + 3000 + 2000 * index).toUTCString() })
      t.same([otherFormat.status, otherFormat.text, otherFormat.headers.get('idempotent-replayed')], [422, 'Error: This Idempotency-Key was already used with another request.', null], accept)
    }
    const sameFormat = await service.call('POST', '/People/Update/OneChange', { body, headers: { ...headers, Accept: 'application/json' }, date: new Date(Date.now() + 7000).toUTCString() })
    t.same([sameFormat.status, sameFormat.text, sameFormat.headers.get('idempotent-replayed')], [200, first.text, 'true'], 'Accept: application/json is the same request')
    const xmlHeaders = { 'Idempotency-Key': 'order-7f3a-xml', Accept: 'application/xml' }
    const xmlFirst = await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Christine', LastName: 'Darden' }, headers: xmlHeaders })
    const xmlRetry = await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Christine', LastName: 'Darden' }, headers: xmlHeaders, date: new Date(Date.now() + 1000).toUTCString() })
    t.same([xmlRetry.status, xmlRetry.text, xmlRetry.headers.get('idempotent-replayed'), xmlRetry.headers.get('content-type')], [200, xmlFirst.text, 'true', xmlFirst.headers.get('content-type')], 'an XML retry gets the XML answer')
    t.match(xmlFirst.text, /^<\?xml/)
    t.equal(await peopleCount(service), 2, 'one person for each Idempotency-Key')

    // Keys are per API key: another key may use the same Idempotency-Key for its own request.
    const otherKey = await insertKey(service)
    t.equal((await service.call('POST', '/People/Update/OneChange', { body, headers, key: otherKey })).status, 200)
    t.equal(await peopleCount(service), 3)

    // A refused body (400) is not stored: the key stays free for the corrected request.
    const fresh = { 'Idempotency-Key': 'order-7f3b' }
    t.equal((await service.call('POST', '/People/Update/OneChange', { body: { Nope: 1 }, headers: fresh })).status, 400)
    t.equal((await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Mary', LastName: 'Jackson' }, headers: fresh })).status, 200)

    // A handler's 4xx is not stored either (it changed nothing): the same key stays free,
    // so the corrected request runs, and the same refused request runs again, not replayed.
    const missing = { 'Idempotency-Key': 'remove-999999' }
    const gone = await service.call('POST', '/People/Update/OneRemove', { body: { Id: 999999 }, headers: missing })
    t.equal(gone.status, 404)
    const goneAgain = await service.call('POST', '/People/Update/OneRemove', { body: { Id: 999999 }, headers: missing })
    t.equal(goneAgain.status, 404)
    t.equal(goneAgain.headers.get('idempotent-replayed'), null, 'refused again, not replayed')
    const someone = (await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Annie', LastName: 'Easley' } })).json.Id as number
    const badDate = { 'Idempotency-Key': 'birthday-fix' }
    const refused = await service.call('POST', '/People/Update/OneChange', { body: { Id: someone, Birthday: '2026-02-30' }, headers: badDate })
    t.equal(refused.status, 400, refused.text)
    const fixed = await service.call('POST', '/People/Update/OneChange', { body: { Id: someone, Birthday: '2026-02-28' }, headers: badDate })
    t.equal(fixed.status, 200, fixed.text)
    const corrected = await service.call('POST', '/People/Update/OneRemove', { body: { Id: someone }, headers: missing })
    t.equal(corrected.status, 200, corrected.text)
    const rows = await service.kernel.database.db.selectFrom('api_idempotency').select(['idem_key', 'status']).where('key_id', '=', service.admin.id).execute()
    t.same(rows.map((row) => Number(row.status)).filter((status) => status < 200 || status >= 300), [], 'only 2xx answers are stored')

    // A bad key value is a 400 that names the header; reads ignore the header.
    const badKey = await service.call('POST', '/People/Update/OneChange', { body, headers: { 'Idempotency-Key': 'has space' } })
    t.equal(badKey.status, 400)
    t.equal(badKey.text, 'Error: Idempotency-Key must be 1 to 255 visible ASCII characters.')
    t.equal((await service.call('GET', '/Api/Read/Acl', { headers })).status, 200)
  }),
)

t.test('Idempotency-Key: a retry while the first call runs is 409; answers expire after 24 hours', async (t) => {
  let now = Date.now()
  const service = await startService(t, { kind: 'sqlite', clock: () => now })
  const db = service.kernel.database.db
  // A claim left by a call still running (or by a process that died mid-call).
  await db.insertInto('api_idempotency').values({ key_id: service.admin.id, idem_key: 'busy', request_hash: 'x', status: 0, content_type: null, headers: null, body: null, created_at: now }).execute()
  const body = { FirstName: 'Busy', LastName: 'Bee' }
  const busy = await service.call('POST', '/People/Update/OneChange', { body, headers: { 'Idempotency-Key': 'busy' } })
  t.equal(busy.status, 422, 'another request hash is a mismatch even while running')
  await db.updateTable('api_idempotency').set({ request_hash: 'y' }).execute()
  const first = await service.call('POST', '/People/Update/OneChange', { body, headers: { 'Idempotency-Key': 'day' } })
  t.equal(first.status, 200)
  const stored = await db.selectFrom('api_idempotency').selectAll().where('idem_key', '=', 'day').executeTakeFirstOrThrow()
  await db.updateTable('api_idempotency').set({ status: 0 }).where('idem_key', '=', 'day').execute()
  const running = await service.call('POST', '/People/Update/OneChange', { body, headers: { 'Idempotency-Key': 'day' } })
  t.equal(running.status, 409)
  t.equal(running.text, 'Error: A request with this Idempotency-Key is still being processed; try again shortly.')
  await db.updateTable('api_idempotency').set({ status: stored.status }).where('idem_key', '=', 'day').execute()
  const replayedAnswer = await service.call('POST', '/People/Update/OneChange', { body, headers: { 'Idempotency-Key': 'day' } })
  t.equal(replayedAnswer.status, 200, replayedAnswer.text)
  t.equal(replayedAnswer.headers.get('idempotent-replayed'), 'true')
  now += 24 * 3_600_000 + 1000
  const dayLater = await service.call('POST', '/People/Update/OneChange', { body, headers: { 'Idempotency-Key': 'day' }, date: new Date(now).toUTCString() })
  t.equal(dayLater.status, 200)
  t.equal(dayLater.headers.get('idempotent-replayed'), null, 'after 24 hours the key is new again')
})

/** Makes every `event` (UPDATE or DELETE) of api_idempotency fail until the returned function is called. */
async function failIdempotencyWrites(service: Service, kind: string, event: 'UPDATE' | 'DELETE'): Promise<() => Promise<void>> {
  const db = service.kernel.database.db
  const name = `idem_fail_${event.toLowerCase()}`
  await sql.raw(kind === 'sqlite'
    ? `CREATE TRIGGER ${name} BEFORE ${event} ON api_idempotency BEGIN SELECT RAISE(ABORT, 'injected fault'); END`
    : `CREATE TRIGGER ${name} BEFORE ${event} ON api_idempotency FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected fault'`).execute(db)
  return async () => void await sql.raw(`DROP TRIGGER ${name}`).execute(db)
}

async function until(check: () => Promise<boolean>, ms = 5000): Promise<boolean> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await check()) return true
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return check()
}

t.test('Idempotency-Key: an answer the database would not store is never done twice; a claim it would not free is freed later', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const db = service.kernel.database.db
    const claimOf = (idemKey: string) => db.selectFrom('api_idempotency').selectAll().where('idem_key', '=', idemKey).executeTakeFirst()
    const headers = { 'Idempotency-Key': 'lost-answer' }
    const body = { FirstName: 'Only', LastName: 'Once' }

    let healed = await failIdempotencyWrites(service, kind, 'UPDATE')
    const first = await service.call('POST', '/People/Update/OneChange', { body, headers })
    t.equal(first.status, 200, 'the work was done and answered')
    const retry = await service.call('POST', '/People/Update/OneChange', { body, headers })
    t.equal(retry.status, 200, retry.text)
    t.equal(retry.headers.get('idempotent-replayed'), 'true', 'the retry gets the first answer, not a 409 nor a second run')
    t.equal(JSON.parse(retry.text).Id, JSON.parse(first.text).Id)
    const other = await service.call('POST', '/People/Update/OneChange', { body: { ...body, LastName: 'Twice' }, headers })
    t.equal(other.status, 422, 'another request under the key is still a mismatch')
    await healed()
    t.ok(await until(async () => Number((await claimOf('lost-answer'))?.status) === 200), 'the answer is written once the database takes it')
    t.equal(await peopleCount(service), 1, 'one person')

    healed = await failIdempotencyWrites(service, kind, 'DELETE')
    const refused = await service.call('POST', '/People/Update/OneRemove', { body: { Id: 999999 }, headers: { 'Idempotency-Key': 'lost-release' } })
    t.equal(refused.status, 404)
    t.equal(Number((await claimOf('lost-release'))?.status), 0, 'the claim could not be freed yet')
    await healed()
    t.ok(await until(async () => (await claimOf('lost-release')) === undefined), 'it is freed once the database takes it')
  }),
)

/** A write that runs until the test lets it end, counting how often it ran (in any kernel of this test process). */
function gatedWrite() {
  const state = { runs: 0, open: () => {} }
  const opened = new Promise<void>((resolve) => (state.open = resolve))
  const plugin: Plugin = {
    name: 'gate',
    defaultGroups: [{ name: 'Gate', paths: [{ path: '/Gate/Make', displayName: 'a slow write' }] }],
    setup: () => [
      defineRoute<{ Name: string }>({
        method: 'POST',
        path: '/Gate/Make',
        body: { type: 'object', required: ['Name'], additionalProperties: false, properties: { Name: { type: 'string', maxLength: 20 } } },
        xml: { root: 'Made' },
        handler: async () => {
          const run = ++state.runs
          // Only the first run waits: a second one (the bug) answers at once, so the test fails instead of hanging.
          if (run === 1) await opened
          return { Run: run }
        },
      }),
    ],
  }
  return { plugin, state }
}

t.test('Idempotency-Key: a call running longer than twice timeouts.requestMs keeps its key; a claim no process renews is taken over', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const gate = gatedWrite()
    // A short requestMs: a claim not renewed for 1 s counts as left by a dead process.
    const timeouts = { headersMs: 500, requestMs: 500, keepAliveMs: 5000, maxHeaderSize: 16384 }
    const service = await startService(t, { kind, plugins: [gate.plugin], config: { timeouts } })
    // On MariaDB the retry goes to a second process on the same database, as behind a load balancer.
    const other = kind === 'mysql' ? await siblingOf(t, service, [gate.plugin]) : service
    const headers = { 'Idempotency-Key': 'long-import' }
    const body = { Name: 'long' }

    const first = service.call('POST', '/Gate/Make', { body, headers })
    await until(async () => gate.state.runs === 1)
    await new Promise((resolve) => setTimeout(resolve, 2500))
    const retry = await other.call('POST', '/Gate/Make', { body, headers })
    t.equal(retry.status, 409, 'still running after 2.5 s: the retry waits, it does not run beside it')
    t.equal(retry.text, 'Error: A request with this Idempotency-Key is still being processed; try again shortly.')
    t.equal(gate.state.runs, 1, 'the work was started once')
    gate.state.open()
    const answered = await first
    t.same([answered.status, answered.json], [200, { Run: 1 }])
    const replayed = await other.call('POST', '/Gate/Make', { body, headers })
    t.same([replayed.status, replayed.json, replayed.headers.get('idempotent-replayed')], [200, { Run: 1 }, 'true'], 'the retry after it gets its answer')
    t.equal(gate.state.runs, 1)

    // A claim left by a process that died mid-call (nobody renews it) is taken over after 1 s.
    const raw = JSON.stringify({ Name: 'orphan' })
    const requestHash = createHash('sha256').update('POST /Gate/Make?\n').update(raw).digest('hex')
    await service.kernel.database.db.insertInto('api_idempotency').values({ key_id: service.admin.id, idem_key: 'orphan', request_hash: requestHash, status: 0, content_type: null, headers: null, body: null, created_at: Date.now() - 1500 }).execute()
    const takenOver = await other.call('POST', '/Gate/Make', { rawBody: raw, headers: { 'Idempotency-Key': 'orphan' } })
    t.same([takenOver.status, takenOver.json, takenOver.headers.get('idempotent-replayed')], [200, { Run: 2 }, null], 'run by the retry')
  }),
)

async function stop(mariadb: PrivateMariadb): Promise<void> {
  mariadb.pause()
  await mariadb.stopped()
}

/** A write whose database stops answering (SIGSTOP) at a point of its transaction the test chooses: before its insert, or as its COMMIT goes out. */
function pausingWrite(mariadb: PrivateMariadb) {
  const state: { pauseBefore: 'insert' | 'commit' | null } = { pauseBefore: null }
  const plugin: Plugin = {
    name: 'paused',
    defaultGroups: [{ name: 'Paused', paths: [{ path: '/Paused/Write', displayName: 'a write the database stops answering' }] }],
    migrations: {
      '0001-paused-writes': {
        async up(db) {
          await db.schema.createTable('paused_writes').addColumn('name', 'varchar(20)', (column) => column.notNull()).execute()
        },
      },
    },
    setup: (kernel) => [
      defineRoute<{ Name: string }>({
        method: 'POST',
        path: '/Paused/Write',
        body: { type: 'object', required: ['Name'], additionalProperties: false, properties: { Name: { type: 'string', maxLength: 20 } } },
        xml: { root: 'Written' },
        handler: async (call) => {
          await kernel.db.transaction().execute(async (trx) => {
            if (state.pauseBefore === 'insert') await stop(mariadb)
            await sql`insert into paused_writes (name) values (${call.body.Name})`.execute(trx)
            if (state.pauseBefore === 'commit') await stop(mariadb)
          })
          return { Written: 1 }
        },
      }),
    ],
  }
  return { plugin, state }
}

// A 503 after the time limit used to free the key like any 5xx: a retry then wrote a second
// time when the COMMIT the database had received was carried out once it answered again.
t.test('Idempotency-Key after a 503 of a database that stopped answering: a retry runs again only when the write cannot have landed (MariaDB)', async (t) => {
  const mariadb = await PrivateMariadb.create()
  t.teardown(() => mariadb.destroy())
  const paused = pausingWrite(mariadb)
  const service = await startService(t, { kind: 'sqlite', plugins: [paused.plugin], config: { databaseUrl: mariadb.url, database: { queryTimeoutMs: 500 } } })
  const written = async () => Number((await sql<{ n: number }>`select count(*) as n from paused_writes`.execute(service.kernel.database.db)).rows[0].n)
  const answersAgain = () => until(async () => (await written().catch(() => -1)) >= 0, 20_000)
  const write = (name: string) => service.call('POST', '/Paused/Write', { body: { Name: name }, headers: { 'Idempotency-Key': `paused-${name}` } })

  // Stopped before its insert: the transaction's connection is gone, it never commits; the retry does the work.
  paused.state.pauseBefore = 'insert'
  t.equal((await write('insert')).status, 503)
  paused.state.pauseBefore = null
  mariadb.resume()
  t.ok(await answersAgain())
  t.equal(await written(), 0, 'nothing was written')
  const rerun = await write('insert')
  t.same([rerun.status, rerun.json, rerun.headers.get('idempotent-replayed')], [200, { Written: 1 }, null], 'the retry ran')
  t.equal(await written(), 1)

  // Stopped as its COMMIT goes out: the database carries it out once it answers again.
  paused.state.pauseBefore = 'commit'
  t.equal((await write('commit')).status, 503)
  paused.state.pauseBefore = null
  mariadb.resume()
  t.ok(await until(async () => (await written().catch(() => 0)) === 2, 20_000), 'the COMMIT it had received was carried out')
  const retry = await write('commit')
  t.same([retry.status, retry.text, retry.headers.get('idempotent-replayed')], [409, 'Error: The first request with this Idempotency-Key may have been carried out: the database stopped answering while it was being written. Check its outcome before sending it again under a new Idempotency-Key.', 'true'])
  t.equal(await written(), 2, 'not written a second time')
  // Stored with the key: another process on the database refuses the retry too.
  const other = await siblingOf(t, service, [paused.plugin])
  t.ok(await until(async () => (await other.call('POST', '/Paused/Write', { body: { Name: 'commit' }, headers: { 'Idempotency-Key': 'paused-commit' } })).status === 409))
  t.equal(await written(), 2)
})

t.test('Idempotency-Key sent at once to two processes on MariaDB + Redis: one person, one import batch', (t) =>
  forEachDatabase(t, async (t, kind) => {
    if (kind === 'sqlite') return void t.pass('several hosts share MariaDB')
    await withRedis(t, 'shared Redis', async (t, redisUrl) => {
      const service = await startService(t, { kind, config: { redisUrl } })
      const other = await siblingOf(t, service)
      const both = [service, other]
      const send = (index: number, path: string, body: unknown, idemKey: string) => callAt(both[index % 2].base, service, 'POST', path, { body, headers: { 'Idempotency-Key': idemKey } })

      const created = await Promise.all(Array.from({ length: 10 }, (_, index) => send(index, '/People/Update/OneChange', { LastName: 'Racer' }, 'race-1')))
      const made = created.filter((answer) => answer.status === 200 && answer.headers.get('idempotent-replayed') === null)
      t.equal(made.length, 1, 'one call did the work')
      for (const answer of created.filter((answer) => !made.includes(answer))) {
        if (answer.status === 200) t.same(answer.json, made[0].json, 'a later one replays its answer')
        else t.same([answer.status, answer.text], [409, 'Error: A request with this Idempotency-Key is still being processed; try again shortly.'])
      }
      const retries = await Promise.all([0, 1].map((index) => send(index, '/People/Update/OneChange', { LastName: 'Racer' }, 'race-1')))
      t.same(retries.map((answer) => [answer.status, answer.headers.get('idempotent-replayed'), answer.json?.Id]), [[200, 'true', made[0].json.Id], [200, 'true', made[0].json.Id]], 'both processes replay it')
      const others = await Promise.all([0, 1].map((index) => send(index, '/People/Update/OneChange', { LastName: 'Other' }, 'race-1')))
      t.same(others.map((answer) => [answer.status, answer.text]), Array(2).fill([422, 'Error: This Idempotency-Key was already used with another request.']))
      t.equal(await peopleCount(service), 1, 'one person')

      const started = await callAt(service.base, service, 'POST', '/people/update/importinit', { body: {} })
      const batch = { ImportId: started.json.ImportId, People: Array.from({ length: 300 }, (_, index) => ({ Source_Id: `R${index}`, LastName: `Row ${index}` })) }
      const imports = await Promise.all(Array.from({ length: 6 }, (_, index) => send(index, '/people/update/importmass', batch, 'race-import')))
      const ran = imports.filter((answer) => answer.status === 200 && answer.headers.get('idempotent-replayed') === null)
      t.equal(ran.length, 1, 'one batch ran')
      t.match(ran[0].json, { Batch: 1, Added: 300, Changed: 0 })
      t.ok(imports.every((answer) => answer === ran[0] || answer.status === 409 || (answer.status === 200 && answer.json.Batch === 1)), 'the others wait (409) or replay it')
      const replayed = await send(1, '/people/update/importmass', batch, 'race-import')
      t.same([replayed.status, replayed.headers.get('idempotent-replayed'), replayed.json?.Batch], [200, 'true', 1])
      t.equal(await peopleCount(service), 301)
    })
  }),
)

t.test('without Redis the used signatures are in the database: a restart forgets none', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const body = JSON.stringify({ FirstName: 'Once', LastName: 'Only' })
    const captured = signedHeaders(service.admin, 'POST', '/People/Update/OneChange', body)
    t.equal((await send(service, 'POST', '/People/Update/OneChange', captured, body)).status, 200)
    const rows = await service.kernel.database.db.selectFrom('api_used_signatures').selectAll().execute()
    t.same(rows.map((row) => [Number(row.key_id), row.signature]), [[service.admin.id, captured['x-apihmac']]], 'one row: the write, not the reads')
    t.ok(Number(rows[0].expires_at) >= Date.now() + 9 * 60_000, 'kept twice the default 5-minute window')

    const restarted = await service.restart()
    const replayed = await send(restarted, 'POST', '/People/Update/OneChange', captured, body)
    t.equal(replayed.status, 401, 'refused after a restart too')
    t.equal(replayed.text, 'Error: This request was already used (replay).')
    t.equal(await peopleCount(restarted), 1)

    // A use whose time is over (not purged yet) no longer counts: the date check alone guards it then.
    await restarted.kernel.database.db.updateTable('api_used_signatures').set({ expires_at: Date.now() - 1 }).execute()
    t.equal((await send(restarted, 'POST', '/People/Update/OneChange', captured, body)).status, 200)
    t.equal((await send(restarted, 'POST', '/People/Update/OneChange', captured, body)).status, 401, 'and is remembered again')
  }),
)

t.test('with REDIS_URL set the used signatures are in the database too: a Redis outage forgets none', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // Our own redis-server, so stopping it touches no other test.
    const redis = await privateRedis(t, await freePort())
    const service = await startService(t, { kind, config: { redisUrl: redis.url } })
    t.equal(service.kernel.redisReachable(), true)
    const write = (lastName: string) => {
      const body = JSON.stringify({ FirstName: 'Out', LastName: lastName })
      return { body, headers: signedHeaders(service.admin, 'POST', '/People/Update/OneChange', body) }
    }
    const before = write('Before')
    t.equal((await send(service, 'POST', '/People/Update/OneChange', before.headers, before.body)).status, 200, 'used while Redis is up')

    await redis.stop()
    for (let waited = 0; service.kernel.redisReachable(); waited += 50) {
      if (waited > 10_000) throw new Error('the service did not see Redis go')
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const replayedBefore = await send(service, 'POST', '/People/Update/OneChange', before.headers, before.body)
    t.same([replayedBefore.status, replayedBefore.text], [401, 'Error: This request was already used (replay).'], 'replayed while Redis is away')
    const during = write('During')
    t.equal((await send(service, 'POST', '/People/Update/OneChange', during.headers, during.body)).status, 200, 'used while Redis is away')

    const restarted = await service.restart()
    t.equal(restarted.kernel.redisReachable(), false, 'restarted with Redis still away')
    for (const [name, captured] of [['before', before], ['during', during]] as const) {
      t.equal((await send(restarted, 'POST', '/People/Update/OneChange', captured.headers, captured.body)).status, 401, `the write used ${name} the outage, replayed after a restart`)
    }

    await redis.start()
    for (let waited = 0; !restarted.kernel.redisReachable(); waited += 50) {
      if (waited > 20_000) throw new Error('the service did not see Redis return')
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    t.equal((await send(restarted, 'POST', '/People/Update/OneChange', during.headers, during.body)).status, 401, 'the write used during the outage, replayed once Redis is back')
    t.equal(await peopleCount(restarted), 2, 'each write made once')
  }),
)
