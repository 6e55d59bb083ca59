/**
 * The call log (interface 2.3, 4.4; D8): records at levels 0/1/2, POST /Api/Read/Log
 * (read-your-writes, owner only, cache), POST /Api/Read/History, retention purge on a
 * fake clock, no record lost when the kernel closes under load, and a log batch written
 * whole or not at all (Database.insertMany). SQLite and MariaDB.
 */
import t from 'tap'
import { request } from 'node:http'
import { signedHeaders } from '../kernel/auth/signature.ts'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { insertKey } from './helpers/keys.ts'
import { CallLog } from '../kernel/callLog/callLog.ts'

const declaredFields = [
  'RequestTime', 'Http_Host', 'Server_Name', 'Server_Addr', 'Server_Port', 'Remote_Addr', 'Request_Scheme',
  'Request_Method', 'Api_Acl', 'Api_Function', 'Request_Url', 'Http_User_Agent', 'Raw_Request', 'Response_Code',
  'Rsponse', 'Bandwidth', 'Response_Format', 'Seconds', 'Secret',
]
// Interface 2.3: only Request_Url, Http_User_Agent and Raw_Request (and D8 the answer) wait for a level above 1.
const levelZeroFields = ['RequestTime', 'Http_Host', 'Server_Name', 'Server_Addr', 'Server_Port', 'Remote_Addr', 'Request_Scheme', 'Request_Method', 'Api_Acl', 'Api_Function', 'Response_Code', 'Response_Format', 'Seconds', 'Bandwidth', 'Secret']
const levelOneFields = levelZeroFields
const levelTwoFields = [...levelOneFields, 'Request_Url', 'Http_User_Agent', 'Raw_Request', 'Rsponse']

function storedFields(record: Record<string, unknown>): string[] {
  return Object.keys(record).filter((name) => record[name] !== null).sort()
}

async function readLog(service: Service, id: string | number | null, key?: { apiKey: string; secret: string }) {
  return service.call('POST', '/Api/Read/Log', { body: { LogRequestId: Number(id) }, key })
}

t.test('a call with x-LogLevel: 2 is readable at once with its URL, user agent and raw request', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // Records stay in the queue for a minute: the read below can only be served from it.
    const service = await startService(t, { kind, config: { log: { ...defaultLog(), flushMs: 60_000, batchSize: 10_000 } } })
    const call = await service.call('GET', '/Api/Read/Acl?format=json', { headers: { 'x-LogLevel': '2', 'User-Agent': 'walk-through/1.0' } })
    t.equal(call.status, 200)
    const requestId = call.headers.get('x-requestid')
    t.match(requestId, /^\d+$/)
    const inTable = await service.kernel.database.db.selectFrom('api_log').select('id').where('id', '=', Number(requestId)).execute()
    t.equal(inTable.length, 0, 'the record is not written yet')

    const log = await readLog(service, requestId)
    t.equal(log.status, 200)
    t.same(Object.keys(log.json), declaredFields, 'the declared fields of interface 2.3, then Response_Format and Seconds')
    t.match(log.json, {
      RequestTime: /^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/,
      Http_Host: `127.0.0.1:${service.port}`,
      Server_Name: 'keygate-0',
      Server_Addr: '127.0.0.1',
      Server_Port: service.port,
      Remote_Addr: '127.0.0.1',
      Request_Scheme: 'HTTP',
      Request_Method: 'GET',
      Api_Acl: Number,
      Api_Function: '/Api/Read/Acl',
      Request_Url: '/v1.0/Api/Read/Acl?format=json',
      Http_User_Agent: 'walk-through/1.0',
      Raw_Request: String,
      Response_Code: 200,
      Response_Format: 'json',
      Seconds: Number,
      Bandwidth: call.text.length,
    })
    t.same(log.json.Rsponse, call.json, 'the answer as it was sent')
    const raw = JSON.parse(log.json.Raw_Request)
    t.match(raw, { method: 'GET', url: '/v1.0/Api/Read/Acl?format=json', headers: { 'x-apikey': '[redacted]', 'x-apihmac': '[redacted]', 'x-apidate': '[redacted]', 'user-agent': 'walk-through/1.0', 'x-loglevel': '2' } })
    t.notOk(log.json.Raw_Request.includes(service.admin.apiKey), 'the API key is not in the raw request')

    const again = await readLog(service, requestId)
    t.equal(again.headers.get('x-cache'), 'HIT', 'a repeated read comes from the cache')
    t.same(again.json, log.json)
    t.equal((await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: String(requestId) } })).status, 200, 'the id may be sent as the header text')

    // After a restart (close writes the queue) the record comes from the table.
    const restarted = await service.restart()
    const fromTable = await readLog(restarted, requestId)
    t.equal(fromTable.status, 200)
    t.equal(fromTable.headers.get('x-cache'), null)
    t.same(fromTable.json, log.json, 'the same record from the table as from the queue')
  }),
)

t.test('at LogLevel 2 an answer served from the response cache is logged as sent, from the queue and from the table', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // The log records its bytes as they were cached (no string made on the request
    // thread); read back they are the same answer, in whatever format it was sent.
    const service = await startService(t, { kind, config: { log: { ...defaultLog(), flushMs: 60_000, batchSize: 10_000 } } })
    const made: { format: string; id: string; text: string }[] = []
    for (const format of ['json', 'xml']) {
      t.equal((await service.call('GET', `/Api/Read/Acl?format=${format}`)).status, 200)
      const hit = await service.call('GET', `/Api/Read/Acl?format=${format}`, { headers: { 'x-LogLevel': '2' } })
      t.equal(hit.headers.get('x-cache'), 'HIT', `the ${format} answer came from the cache`)
      made.push({ format, id: hit.headers.get('x-requestid')!, text: hit.text })
    }
    const fromQueue = async (current: Service) => Promise.all(made.map(async ({ id }) => (await readLog(current, id)).json))
    const queued = await fromQueue(service)
    t.same(queued[0].Rsponse, JSON.parse(made[0].text), 'json: the answer as it was sent (from the queue)')
    t.equal(queued[1].Rsponse, made[1].text, 'xml: the answer as it was sent (from the queue)')
    t.equal(queued[0].Bandwidth, Buffer.byteLength(made[0].text))

    const restarted = await service.restart()
    // Kept once beside the records that name it (test/shared-answers.test.ts).
    const stored = await restarted.kernel.database.db.selectFrom('api_log')
      .innerJoin('api_log_body', 'api_log_body.digest', 'api_log.response_digest')
      .select(['api_log.id', 'api_log_body.body']).where('api_log.id', 'in', made.map(({ id }) => Number(id))).orderBy('api_log.id').execute()
    t.same(stored.map((row) => typeof row.body), ['string', 'string'], 'stored as text')
    t.same(stored.map((row) => row.body), made.map(({ text }) => text), 'byte for byte the answers sent')
    t.same(await fromQueue(restarted), queued, 'the same records from the table as from the queue')
  }),
)

t.test('only the key that made the call reads its record; unknown ids look the same', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const call = await service.call('GET', '/Api/Read/Acl')
    const requestId = Number(call.headers.get('x-requestid'))
    const other = await insertKey(service)
    const othersRead = await readLog(service, requestId, other)
    const unknown = await readLog(service, requestId + 4096)
    t.equal(othersRead.status, 404)
    t.equal(unknown.status, 404)
    t.equal(othersRead.text, unknown.text, 'the same text: nobody learns that the id exists')
    t.match(unknown.text, /^Error: /)

    for (const [name, body] of [['missing', {}], ['not a number', { LogRequestId: 'abc' }], ['zero', { LogRequestId: 0 }], ['fraction', { LogRequestId: 1.5 }], ['extra field', { LogRequestId: 1, Other: 1 }]] as const) {
      const answer = await service.call('POST', '/Api/Read/Log', { body })
      t.equal(answer.status, 400, `${name}: 400`)
      t.match(answer.text, /^Error: /)
    }
    t.equal((await service.call('POST', '/Api/Read/Log')).status, 400, 'no body: 400')
    // The digits as a string are judged as the number they spell: the same 400, never a 404 or a rounded id.
    for (const [number, text] of [[0, '0'], [0, '0000'], [Number.MAX_SAFE_INTEGER + 1, '9007199254740992'], [1e16, '9999999999999999']] as const) {
      const asNumber = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: number } })
      const asText = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: text } })
      t.equal(asNumber.status, 400, `${number}: 400`)
      t.equal(asText.status, 400, `"${text}": 400`)
      t.equal(asText.text, asNumber.text, `"${text}" is refused as ${number} is`)
    }
    t.equal((await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: String(Number.MAX_SAFE_INTEGER) } })).status, 404, 'the largest id is looked up')
  }),
)

t.test('each log level stores exactly its fields', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const levels: [string, Record<string, string>, { log_level?: number }, string[]][] = [
      ['key level 0, no header', {}, {}, levelZeroFields],
      ['header 0', { 'x-LogLevel': '0' }, { log_level: 2 }, levelZeroFields],
      ['key level 1', {}, { log_level: 1 }, levelOneFields],
      ['header 1', { 'x-LogLevel': '1' }, {}, levelOneFields],
      ['header 2', { 'x-LogLevel': '2' }, {}, levelTwoFields],
      ['key level 2', {}, { log_level: 2 }, levelTwoFields],
      ['header 5 counts as high', { 'x-LogLevel': '5' }, {}, levelTwoFields],
      ['malformed header: the key level', { 'x-LogLevel': 'max' }, { log_level: 1 }, levelOneFields],
    ]
    for (const [name, headers, fields, expected] of levels) {
      const key = await insertKey(service, fields)
      const call = await service.call('GET', '/Api/Read/Acl', { key, headers })
      const log = await readLog(service, call.headers.get('x-requestid'), key)
      t.equal(log.status, 200, name)
      t.same(storedFields(log.json), [...expected].sort(), name)
    }

    // Level 0 too says where the call was answered, and how (interface 2.3's types).
    const plain = await insertKey(service)
    const plainCall = await service.call('GET', '/Api/Read/Acl', { key: plain })
    const plainLog = await readLog(service, plainCall.headers.get('x-requestid'), plain)
    t.match(plainLog.json, { Http_Host: `127.0.0.1:${service.port}`, Server_Name: 'keygate-0', Server_Addr: '127.0.0.1', Server_Port: service.port, Request_Scheme: 'HTTP', Request_Url: null, Http_User_Agent: null, Raw_Request: null, Rsponse: null })

    // An error answer keeps its short message at every level.
    const key = await insertKey(service)
    const failed = await service.call('POST', '/Api/Read/Log', { key, body: { LogRequestId: 'nope' } })
    t.equal(failed.status, 400)
    const failedLog = await readLog(service, failed.headers.get('x-requestid'), key)
    t.same(storedFields(failedLog.json), [...levelZeroFields, 'Rsponse'].sort())
    t.match(failedLog.json, { Response_Code: 400, Rsponse: failed.text, Response_Format: 'text' })

    // A logged rate-limit read shows one object per window (interface 2.3).
    const limited = await insertKey(service, { max_hits: '10/1Sec,1000/1Hour,100000/1Mon', log_level: 2 })
    const limits = await service.call('GET', '/Api/Read/Limits', { key: limited })
    const limitsLog = await readLog(service, limits.headers.get('x-requestid'), limited)
    t.same(Object.keys(limitsLog.json.Rsponse), ['1Sec', '1Hour', '1Mon'])
    t.same(limitsLog.json.Rsponse, limits.json)
    // ... whatever format it was answered in (XML sends one <Window> item per window).
    const limitsXml = await service.call('GET', '/Api/Read/Limits?format=xml', { key: limited })
    t.match(limitsXml.text, /<Limits>\s*<Window>\s*<Window>1Sec<\/Window>/)
    const limitsXmlLog = await readLog(service, limitsXml.headers.get('x-requestid'), limited)
    t.equal(limitsXmlLog.json.Response_Format, 'xml')
    t.same(Object.keys(limitsXmlLog.json.Rsponse), ['1Sec', '1Hour', '1Mon'])
    t.match(limitsXmlLog.json.Rsponse['1Sec'], { Limit: 10, Remain: Number, ResetDate: String, TimeLeft: String })

    // An XML answer is logged as its value.
    const xml = await service.call('GET', '/Api/Read/Acl?format=xml', { headers: { 'x-LogLevel': '2' } })
    t.match(xml.text, /^<\?xml/)
    const xmlLog = await readLog(service, xml.headers.get('x-requestid'))
    t.equal(xmlLog.json.Response_Format, 'xml')
    t.ok(Array.isArray(xmlLog.json.Rsponse), 'Rsponse holds the ACL entries, not XML text')
  }),
)

t.test('POST /Api/Read/History', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const key = await insertKey(service)
    const start = new Date(Date.now() - 1000).toISOString()
    const ids: number[] = []
    for (const path of ['/Api/Read/Acl', '/Api/Read/Limits', '/Api/Read/Acl']) {
      ids.push(Number((await service.call('GET', path, { key })).headers.get('x-requestid')))
    }
    await service.call('GET', '/Api/Read/Acl') // another key's call is never listed

    const all = await service.call('POST', '/Api/Read/History', { key, body: {} })
    t.equal(all.status, 200)
    t.match(all.json, { Total: 3, Page: '1 of 1' })
    t.same(all.json.Calls.map((call: { Id: number }) => call.Id), [...ids].reverse(), 'newest first, own calls only')
    t.same(Object.keys(all.json.Calls[0]), ['Id', 'RequestTime', 'Request_Method', 'Api_Function', 'Api_Acl', 'Response_Code', 'Seconds', 'Bandwidth'])

    const paged = await service.call('POST', '/Api/Read/History', { key, body: { page: 2, size: 2 } })
    t.match(paged.json, { Total: 4, Page: '2 of 2' }, 'the first history call is listed now')
    t.same(paged.json.Calls.map((call: { Id: number }) => call.Id), [ids[1], ids[0]])

    const acl = await service.call('POST', '/Api/Read/History', { key, body: { Function: '/api/read/acl' } })
    t.same(acl.json.Calls.map((call: { Id: number }) => call.Id), [ids[2], ids[0]], 'Function filter, any letter case')
    // Surrounding white space is dropped, so SQLite and MariaDB (whose comparison ignores trailing spaces) answer alike.
    for (const padded of ['/Api/Read/Acl ', ' /api/read/acl\t']) {
      const answer = await service.call('POST', '/Api/Read/History', { key, body: { Function: padded } })
      t.equal(answer.status, 200, answer.text)
      t.same(answer.json.Calls.map((call: { Id: number }) => call.Id), [ids[2], ids[0]], `Function ${JSON.stringify(padded)}`)
    }
    t.equal((await service.call('POST', '/Api/Read/History', { key, body: { function: '  ' } })).text, 'Error: function must not be empty.', 'white space alone is no path')

    const inRange = await service.call('POST', '/Api/Read/History', { key, body: { From: start, To: new Date(Date.now() + 1000).toUTCString() } })
    t.ok(inRange.json.Total >= 3)
    const before = await service.call('POST', '/Api/Read/History', { key, body: { To: start } })
    t.match(before.json, { Total: 0, Page: '1 of 1', Calls: [] })
    // RequestTime is shown in whole seconds: as From and To it finds its own call (To runs to the end of its second).
    const second = all.json.Calls[0].RequestTime
    const sameSecond = await service.call('POST', '/Api/Read/History', { key, body: { From: second, To: second, Function: '/Api/Read/Acl' } })
    t.ok(sameSecond.json.Calls.some((call: { Id: number }) => call.Id === ids[2]), 'a call found by its own RequestTime')
    const day = new Date(second).toISOString().slice(0, 10)
    const sameDay = await service.call('POST', '/Api/Read/History', { key, body: { From: day, To: day, Function: '/Api/Read/Acl' } })
    t.ok(sameDay.json.Calls.some((call: { Id: number }) => call.Id === ids[2]), 'a date alone as To runs to the end of its day')

    const lower = await service.call('POST', '/Api/Read/History', { key, body: { from: day, to: day, function: '/Api/Read/Acl' } })
    t.same(lower.json.Calls.map((call: { Id: number }) => call.Id), sameDay.json.Calls.map((call: { Id: number }) => call.Id), 'from, to and function as the audit read spells them')
    const xml = await service.call('POST', '/Api/Read/History?format=xml', { key, body: { size: 2 } })
    t.match(xml.text, /<History>\s*<Total>\d+<\/Total>\s*<Page>[^<]+<\/Page>\s*<Call>\s*<Id>/, 'XML: one <Call> per call')
    t.notMatch(xml.text, /<Calls>/)
    const both = await service.call('POST', '/Api/Read/History', { key, body: { From: day, from: day } })
    t.equal(both.text, 'Error: Give From or from, not both.')
    const badLower = await service.call('POST', '/Api/Read/History', { key, body: { from: 'x' } })
    t.match(badLower.text, /^Error: from must be an HTTP-date/, 'the error names the spelling given')

    for (const body of [{ From: 'yesterday' }, { From: new Date().toISOString(), To: start }, { size: 0 }, { size: 1001 }, { page: 0 }, { Sort: 'Id' }, { From: day, from: day }]) {
      const answer = await service.call('POST', '/Api/Read/History', { key, body })
      t.equal(answer.status, 400, JSON.stringify(body))
    }
  }),
)

/** A signed POST whose body arrives `lagMs` after its headers, as a slow upload's does; resolves with its request id. */
function slowUpload(service: Service, path: string, body: string, lagMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers = { ...signedHeaders(service.admin, 'POST', path, body), 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }
    const call = request({ host: '127.0.0.1', port: service.port, method: 'POST', path: `/v1.0${path}`, headers }, (response) => {
      response.resume()
      response.on('end', () => resolve(Number(response.headers['x-requestid'])))
    }).on('error', reject)
    call.write(body.slice(0, 1))
    setTimeout(() => call.end(body.slice(1)), lagMs)
  })
}

t.test('History: a call whose body came slowly is found by its own RequestTime', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    // The request id is made once the body is in; RequestTime is the request's arrival.
    const id = await slowUpload(service, '/People/Update/OneChange', JSON.stringify({ FirstName: 'Slow', LastName: 'Upload' }), 1300)
    const record = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: id } })
    const second = record.json.RequestTime
    const found = await service.call('POST', '/Api/Read/History', { body: { From: second, To: second, Function: '/People/Update/OneChange' } })
    t.same(found.json.Calls.map((call: { Id: number }) => call.Id), [id], 'From = To = its RequestTime')
    const after = new Date(Date.parse(second) + 1000).toUTCString()
    const later = await service.call('POST', '/Api/Read/History', { body: { From: after, Function: '/People/Update/OneChange' } })
    t.equal(later.json.Total, 0, 'and not by the second its id was made in')
    const usage = await service.call('POST', '/Api/Read/Usage', { body: {} })
    t.equal(usage.status, 200, usage.text)
  }),
)

t.test('retention: details after LogRaw days (at most 7), records after 30 days, in small batches', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const db = service.kernel.database.db
    const shortRaw = await insertKey(service, { log_raw: 1 })
    const longRaw = await insertKey(service, { log_raw: 90 })
    const start = Date.now()
    const detailed: number[] = []
    for (const key of [shortRaw, shortRaw, longRaw, longRaw, longRaw]) {
      detailed.push(Number((await service.call('GET', '/Api/Read/Acl', { key, headers: { 'x-LogLevel': '2' } })).headers.get('x-requestid')))
    }
    const failed = Number((await service.call('POST', '/Api/Read/Log', { key: longRaw, headers: { 'x-LogLevel': '2' }, body: {} })).headers.get('x-requestid'))
    const minimal = Number((await service.call('GET', '/Api/Read/Acl', { key: longRaw })).headers.get('x-requestid'))
    // A history read writes the queue out.
    await service.call('POST', '/Api/Read/History', { key: shortRaw, body: {} })

    const rows = async (ids: number[]) =>
      db.selectFrom('api_log').select(['id', 'request_url', 'http_user_agent', 'raw_request', 'response', 'detail_until']).where('id', 'in', ids).orderBy('id').execute()
    const purgeAt = (offsetMs: number) => new CallLog(db, { ...service.config.log, purgeBatch: 2 }, () => start + offsetMs, () => undefined).purge()

    t.same(await purgeAt(60_000), { detailsCleared: 0, recordsDeleted: 0 }, 'nothing is due after a minute')
    t.same(await purgeAt(2 * 86_400_000), { detailsCleared: 2, recordsDeleted: 0 }, 'LogRaw 1: details gone after a day')
    for (const row of await rows(detailed.slice(0, 2))) t.match(row, { request_url: null, http_user_agent: null, raw_request: null, response: null })
    for (const row of await rows(detailed.slice(2))) t.not(row.raw_request, null, 'LogRaw 90 keeps its details after 2 days')

    t.same(await purgeAt(8 * 86_400_000), { detailsCleared: 4, recordsDeleted: 0 }, 'LogRaw 90 is held to the 7-day bound (3 calls + the failed one)')
    for (const row of await rows(detailed.slice(2))) t.match(row, { request_url: null, http_user_agent: null, raw_request: null, response: null })
    const [failedRow] = await rows([failed])
    t.match(failedRow, { raw_request: null, response: /^Error: / }, 'an error message is not a detail')
    t.equal((await rows([minimal])).length, 1)
    const read = await readLog(service, detailed[2], longRaw)
    t.match(read.json, { Request_Url: null, Raw_Request: null, Rsponse: null, Api_Function: '/Api/Read/Acl' }, 'the record is still readable without its details')

    const total = Number((await db.selectFrom('api_log').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n)
    const deleted = await purgeAt(31 * 86_400_000)
    // (>=: the kernel may write the read just above while the purge runs)
    t.ok(deleted.recordsDeleted >= total, `${deleted.recordsDeleted} records deleted after 30 days`)
    t.equal((await rows([...detailed, failed, minimal])).length, 0, 'every record is gone after 30 days')
    t.equal((await readLog(service, minimal, longRaw)).status, 404)
  }),
)

t.test('closing under load loses no record of an answered call', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // Small batches and a small queue: writes and backpressure are both in play.
    const service = await startService(t, { kind, config: { log: { ...defaultLog(), batchSize: 7, queueMax: 20, flushMs: 5 } } })
    const total = 150
    let answered = 0
    const calls = Array.from({ length: total }, async () => {
      try {
        const answer = await service.call('GET', '/Api/Read/Acl', { headers: { 'x-LogLevel': '2' } })
        answered++
        return answer.status === 200 ? Number(answer.headers.get('x-requestid')) : null
      } catch {
        return null // refused by a closing server: never answered, so no record is owed
      }
    })
    while (answered < 20) await new Promise((resolve) => setTimeout(resolve, 5))
    const restarted = await service.restart()
    const ids = (await Promise.all(calls)).filter((id): id is number => id !== null)
    t.ok(ids.length >= 20, `${ids.length} calls answered`)
    const stored = await restarted.kernel.database.db.selectFrom('api_log').select('id').where('id', 'in', ids).execute()
    t.equal(stored.length, ids.length, 'every answered call has its record')
  }),
)

t.test('a log batch is written whole, value for value, or not at all', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const database = service.kernel.database
    const firstId = 2 ** 52 + 17
    // 123 rows: MySQL's prepared statements take 50 at a time, SQLite's 32, so full
    // statements and a remainder both run; values as level-2 records carry them.
    const rows = Array.from({ length: 123 }, (_, index) => ({
      id: firstId + index, key_id: index % 3 === 0 ? null : 40 + index, request_time: 1_795_000_000_000 + index,
      http_host: null, server_name: null, server_addr: null, server_port: index % 2 ? 8080 : null, remote_addr: '127.0.0.1',
      request_scheme: null, request_method: 'GET', api_acl: 7, api_function: '/Api/Read/Acl', request_url: `/v1.0/Api/Read/Acl?n=${index}`,
      http_user_agent: 'caf\u00e9 \u{1F511} agent', raw_request: index === 5 ? 'x'.repeat(70_000) : `{"n":${index},"q":"'\\"\\\\"}`,
      response_code: 200, response: index % 2 ? null : '[{"Path":"/Api/Read/Acl"}]', response_format: 'json',
      seconds: index / 1000, bandwidth: 3719 + index, detail_until: index % 2 ? 0 : 1_795_600_000_000, signed_with: 'current',
      response_digest: null,
    }))
    await database.insertMany('api_log', rows)
    const stored = await database.db.selectFrom('api_log').selectAll().where('id', '>=', firstId).orderBy('id').execute()
    t.equal(stored.length, rows.length, 'every row')
    t.strictSame(stored, rows, 'value for value: large ids, nulls, Unicode, quotes, a 70 KB text, doubles')

    // A text column may be given as its UTF-8 bytes: an own buffer, or a view into a
    // larger one (Node's shared pool), both stored as their text.
    const bytesFirst = firstId + 500
    const text = '[{"Path":"/Api/Read/Acl","Note":"caf\u00e9 \u{1F511}"}]'
    const ownBuffer = Buffer.allocUnsafeSlow(Buffer.byteLength(text))
    ownBuffer.write(text)
    const pooled = Buffer.from(text)
    const asBytes = [ownBuffer, pooled, new Uint8Array(ownBuffer)].map((response, index) => ({ ...rows[0], id: bytesFirst + index, response }))
    await database.insertMany('api_log', asBytes)
    const fromBytes = await database.db.selectFrom('api_log').select('response').where('id', '>=', bytesFirst).where('id', '<', bytesFirst + 10).orderBy('id').execute()
    t.strictSame(fromBytes.map((row) => row.response), [text, text, text], 'bytes stored as their text')

    // A duplicate id in the middle of a batch: the batch fails and writes nothing of itself.
    const next = rows.slice(0, 60).map((row, index) => ({ ...row, id: firstId + 1000 + index }))
    next[55] = { ...next[55], id: firstId }
    await t.rejects(database.insertMany('api_log', next), 'a batch with a duplicate id is refused')
    const partial = await database.db.selectFrom('api_log').select('id').where('id', '>=', firstId + 1000).execute()
    t.equal(partial.length, 0, 'and none of its rows is in the table')
  }),
)

function defaultLog() {
  return { detailDays: 7, recordDays: 30, batchSize: 500, flushMs: 50, queueMax: 20000, purgeEveryMs: 60000, purgeBatch: 1000 }
}

/** A signed call with headers fetch would not send as given (Host), over node:http. */
function rawCall(service: Service, path: string, extra: Record<string, string>): Promise<{ status: number; requestId: string | undefined }> {
  const headers = { ...signedHeaders(service.admin, 'GET', path), ...extra }
  return new Promise((resolve, reject) => {
    const call = request({ host: '127.0.0.1', port: service.port, method: 'GET', path: `/v1.0${path}`, headers }, (response) => {
      response.resume()
      response.on('end', () => resolve({ status: response.statusCode!, requestId: response.headers['x-requestid'] as string | undefined }))
    })
    call.on('error', reject)
    call.end()
  })
}

t.test('what a caller chooses (Host, User-Agent, a forwarded address) never costs its call the record, on either database', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // Headers up to 1 MB (the most timeouts.maxHeaderSize allows): more than a text column holds.
    const timeouts = { headersMs: 10_000, requestMs: 30_000, keepAliveMs: 5_000, maxHeaderSize: 1_048_576 }
    const service = await startService(t, { kind, config: { trustProxy: ['127.0.0.1'], log: defaultLog(), timeouts } })
    const host = `${'h'.repeat(300)}.example`
    const agent = '\u00e9'.repeat(70_000)
    const zoned = `fe80::1%${'z'.repeat(200)}`
    const calls = [
      await rawCall(service, '/Api/Read/Acl', { Host: host, 'x-LogLevel': '2', 'User-Agent': agent }),
      await rawCall(service, '/Api/Read/Acl', { 'X-Forwarded-For': zoned }),
    ]
    t.same(calls.map((call) => call.status), [200, 200], 'answered')
    // Written to the table (not only readable from the queue), then read back.
    const ids = calls.map((call) => Number(call.requestId))
    const db = service.kernel.database.db
    for (let waited = 0; (await db.selectFrom('api_log').select('id').where('id', 'in', ids).execute()).length < ids.length; waited += 50) {
      if (waited > 10_000) break
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const [first, second] = await Promise.all(ids.map((id) => readLog(service, id)))
    t.equal(first.status, 200, first.text)
    t.equal(first.json.Http_Host, host.slice(0, 255), 'Host cut to its column')
    t.equal(first.json.Http_User_Agent, agent.slice(0, 32_000), 'the user agent cut to its column')
    t.equal(second.status, 200, second.text)
    t.equal(second.json.Remote_Addr, zoned.slice(0, 64), 'the forwarded address cut to its column')
  }),
)
