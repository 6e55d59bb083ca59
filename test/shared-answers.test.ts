/**
 * Shared answers in the call log (issue 19, goal 2; callLog/sharedAnswers.ts): at
 * LogLevel 2 an answer served from the response cache is stored once (api_log_body) and
 * its records name it by digest; reads give it back, a batch writes records and text
 * together or neither, the text lives as long as the last record that may show it,
 * and a record written row by row keeps its own copy. SQLite and MariaDB.
 */
import { createHash } from 'node:crypto'
import t from 'tap'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { insertKey, type TestKey } from './helpers/keys.ts'
import { CallLog } from '../kernel/callLog/callLog.ts'
import { withSharedAnswers } from '../kernel/callLog/sharedAnswers.ts'

const digestOf = (text: string) => createHash('sha256').update(text).digest('base64url')

function quietLog() {
  // Records stay queued until something writes them out (a history read, a restart).
  return { detailDays: 7, recordDays: 30, batchSize: 10_000, flushMs: 60_000, queueMax: 20_000, purgeEveryMs: 60_000, purgeBatch: 1000 }
}

async function readLog(service: Service, id: number, key?: TestKey) {
  return service.call('POST', '/Api/Read/Log', { body: { LogRequestId: id }, key })
}

async function levelTwo(service: Service, path: string, key?: TestKey) {
  const answer = await service.call('GET', path, { key, headers: { 'x-LogLevel': '2' } })
  return { id: Number(answer.headers.get('x-requestid')), text: answer.text, cache: answer.headers.get('x-cache') }
}

t.test('cached answers at level 2 are stored once, named by digest, and read back whole', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: { log: quietLog() } })
    const miss = await levelTwo(service, '/Api/Read/Acl?format=json')
    t.equal(miss.cache, null, 'the first call is the handler\'s own answer')
    const json = [await levelTwo(service, '/Api/Read/Acl?format=json'), await levelTwo(service, '/Api/Read/Acl?format=json'), await levelTwo(service, '/Api/Read/Acl?format=json')]
    const xml = [await levelTwo(service, '/Api/Read/Acl?format=xml'), await levelTwo(service, '/Api/Read/Acl?format=xml')]
    t.same([...json, ...xml.slice(1)].map((call) => call.cache), ['HIT', 'HIT', 'HIT', 'HIT'], 'served from the cache')
    t.equal(new Set(json.map((call) => call.text)).size, 1)

    // From the queue first: the record still holds the bytes.
    t.same((await readLog(service, json[1].id)).json.Rsponse, JSON.parse(json[1].text), 'read from the queue')

    const restarted = await service.restart()
    const db = restarted.kernel.database.db
    const ids = [miss, ...json, ...xml].map((call) => call.id)
    const rows = await db.selectFrom('api_log').select(['id', 'response', 'response_digest', 'detail_until']).where('id', 'in', ids).orderBy('id').execute()
    t.equal(rows.length, ids.length, 'every record written')
    // In id order: the json miss, three json hits, the xml miss, the xml hit.
    const byId = new Map(rows.map((row) => [Number(row.id), row]))
    for (const call of [miss, xml[0]]) {
      t.equal(byId.get(call.id)!.response_digest, null, 'the handler\'s own answer is kept in its record')
      t.type(byId.get(call.id)!.response, 'string')
    }
    for (const call of [...json, xml[1]]) {
      t.equal(byId.get(call.id)!.response, null, `record ${call.id} holds no copy of the cached answer`)
      t.equal(byId.get(call.id)!.response_digest, digestOf(call.text), 'it names the answer by its SHA-256')
    }

    const texts = await db.selectFrom('api_log_body').selectAll().orderBy('body').execute()
    t.same(texts.map((text) => text.body).sort(), [json[0].text, xml[1].text].sort(), 'one text per distinct answer, byte for byte as sent')
    for (const text of texts) {
      t.equal(text.digest, digestOf(text.body))
      const naming = rows.filter((row) => row.response_digest === text.digest)
      t.equal(Number(text.keep_until), Math.max(...naming.map((row) => Number(row.detail_until))), 'kept until the last record that names it may show it')
    }

    for (const call of json) t.same((await readLog(restarted, call.id)).json.Rsponse, JSON.parse(call.text), 'json: the value as sent')
    t.equal((await readLog(restarted, xml[1].id)).json.Rsponse, xml[1].text, 'xml: the text as sent')
    t.same((await readLog(restarted, miss.id)).json.Rsponse, JSON.parse(miss.text))
  }),
)

t.test('a shared text lives as long as the last record that may show it', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    // Two keys with the same groups (so the same answer): details kept 1 day, and 90 (held to 7).
    const [shortRaw, longRaw] = [await insertKey(service, { log_raw: 1 }), await insertKey(service, { log_raw: 90 })]
    const db = service.kernel.database.db
    const start = Date.now()
    const calls: { key: TestKey; id: number; text: string }[] = []
    for (const key of [shortRaw, longRaw]) {
      await service.call('GET', '/Api/Read/Acl', { key })
      for (let index = 0; index < 2; index++) calls.push({ key, ...(await levelTwo(service, '/Api/Read/Acl', key)) })
    }
    t.equal(new Set(calls.map((call) => call.text)).size, 1, 'both keys got the same answer')
    await service.call('POST', '/Api/Read/History', { key: shortRaw, body: {} })
    const digest = digestOf(calls[0].text)
    const kept = async () => db.selectFrom('api_log_body').select(['digest', 'keep_until']).where('digest', '=', digest).execute()
    t.equal((await kept()).length, 1, 'one text for both keys\' records')
    const purgeAt = (offsetMs: number) => new CallLog(db, { ...service.config.log, purgeBatch: 1 }, () => start + offsetMs, () => undefined).purge()

    await purgeAt(2 * 86_400_000)
    const shortRows = await db.selectFrom('api_log').select(['response', 'response_digest']).where('id', 'in', calls.slice(0, 2).map((call) => call.id)).execute()
    t.same(shortRows, [{ response: null, response_digest: null }, { response: null, response_digest: null }], 'LogRaw 1: after a day the records name no answer')
    t.equal((await kept()).length, 1, 'the text stays while a LogRaw 90 record may show it')
    t.same((await readLog(service, calls[3].id, longRaw)).json.Rsponse, JSON.parse(calls[3].text))
    t.equal((await readLog(service, calls[0].id, shortRaw)).json.Rsponse, null)

    await purgeAt(8 * 86_400_000)
    t.equal((await kept()).length, 0, 'gone once no record may show it (the 7-day bound)')
    // (calls[2]: a log read is cached, and calls[3]'s was read above)
    const after = await readLog(service, calls[2].id, longRaw)
    t.equal(after.json.Rsponse, null)
    t.equal(after.json.Api_Function, '/Api/Read/Acl', 'the record itself stays')
  }),
)

t.test('a batch writes its records and their shared text together, or neither; keep_until only grows', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const database = service.kernel.database
    const firstId = 2 ** 52 + 901
    const row = (id: number, detailUntil: number) => ({
      id, key_id: 7, request_time: 1_795_000_000_000, http_host: null, server_name: null, server_addr: null, server_port: null,
      remote_addr: '127.0.0.1', request_scheme: null, request_method: 'GET', api_acl: 1, api_function: '/Api/Read/Acl',
      request_url: null, http_user_agent: null, raw_request: null, response_code: 200, response: null, response_format: 'json',
      seconds: 0.001, bandwidth: 10, detail_until: detailUntil, signed_with: 'current', response_digest: 'd1',
    })
    const text = (keepUntil: number, body: string | Uint8Array = '[{"Path":"/x","Note":"caf\u00e9"}]') => ({ table: 'api_log_body' as const, texts: [{ digest: 'd1', body, keep_until: keepUntil }] })
    const stored = () => database.db.selectFrom('api_log_body').selectAll().where('digest', '=', 'd1').execute()

    // A duplicate id fails the batch: neither the records nor the text are written.
    await t.rejects(database.insertMany('api_log', [row(firstId, 5000), row(firstId, 5000)], text(5000)))
    t.same(await stored(), [], 'no text without its records')
    t.equal((await database.db.selectFrom('api_log').select('id').where('id', '=', firstId).execute()).length, 0, 'no record either')

    await database.insertMany('api_log', [row(firstId, 5000)], text(5000, Buffer.from('[{"Path":"/x","Note":"caf\u00e9"}]')))
    t.same(await stored(), [{ digest: 'd1', body: '[{"Path":"/x","Note":"caf\u00e9"}]', keep_until: 5000 }], 'bytes stored as their text')
    await database.insertMany('api_log', [row(firstId + 1, 3000)], text(3000))
    t.equal(Number((await stored())[0].keep_until), 5000, 'an earlier keep_until does not shorten it')
    await database.insertMany('api_log', [row(firstId + 2, 9000)], text(9000))
    t.equal(Number((await stored())[0].keep_until), 9000, 'a later one lengthens it')
    t.equal((await stored()).length, 1, 'still one text')
  }),
)

t.test('a record written without the shared path keeps its own copy of the answer', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const db = service.kernel.database.db
    // A call log on plain Kysely inserts (as a batch refused for a bad row is written row by row).
    const log = new CallLog(db, { ...service.config.log, flushMs: 5 }, Date.now, () => undefined)
    const id = 2 ** 52 + 4242
    const answer = Buffer.from('{"Acl":[{"Path":"/Api/Read/Acl"}]}')
    log.append({
      id, key_id: 9, request_time: Date.now(), request_method: 'GET', api_function: '/Api/Read/Acl', response_code: 200,
      response: answer, response_digest: digestOf(answer.toString()), response_format: 'json', seconds: 0, bandwidth: answer.length,
      detail_until: Date.now() + 86_400_000, remote_addr: null, signed_with: null,
    })
    await log.close()
    const [row] = await db.selectFrom('api_log').select(['response', 'response_digest']).where('id', '=', id).execute()
    t.same(row, { response: answer.toString(), response_digest: null })
    t.same(await db.selectFrom('api_log_body').selectAll().execute(), [], 'nothing shared')
  }),
)

t.test('a batch as written: each text once, in digest order, kept the longest; the queued rows untouched', async (t) => {
  const a = Buffer.from('{"a":1}')
  const b = Buffer.from('{"b":2}')
  const row = (id: number, response: string | Buffer | null, digest: string | null, detailUntil: number) =>
    ({ id, request_time: 1, request_method: 'GET', api_function: '/x', response_code: 200, response, response_digest: digest, seconds: 0, bandwidth: 0, detail_until: detailUntil })
  const batch = [row(1, b, 'B', 10), row(2, a, 'A', 30), row(3, '{"own":true}', null, 20), row(4, b, 'B', 50), row(5, a, 'A', 5)]
  const before = batch.map((each) => ({ ...each }))
  const { rows, texts } = withSharedAnswers(batch)
  t.same(rows.map((each) => [each.id, each.response, each.response_digest]), [[1, null, 'B'], [2, null, 'A'], [3, '{"own":true}', null], [4, null, 'B'], [5, null, 'A']])
  t.same(texts, [{ digest: 'A', body: a, keep_until: 30 }, { digest: 'B', body: b, keep_until: 50 }], 'one text a digest, in digest order, the latest detail_until')
  t.same(batch, before, 'the queue\'s rows keep their bytes (read-your-writes until written)')
  const plain = [row(6, null, null, 0)]
  t.equal(withSharedAnswers(plain).rows, plain, 'a batch with nothing shared is written as it is')
  t.same(withSharedAnswers(plain).texts, [])
})
