/**
 * Issue 12, item 5: LogLevel 2 stores the raw request with every header that carries a
 * credential redacted: Cookie, Set-Cookie, Proxy-Authorization, any kind of
 * Authorization, token/API-key style headers, and those named in `log.redactHeaders`.
 * Raw_Request is checked, text for text, against a reference built without a prototype.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'
import { loadConfig } from '../kernel/boot/config.ts'
import { rawRequest } from '../kernel/http/stages/log.ts'
import { fastWebhooks, startReceiver } from './helpers/webhookReceiver.ts'

t.test('credential headers are redacted from Raw_Request; others are kept', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: { log: { ...loadConfig({}, {}).log, redactHeaders: ['X-Internal-Sig'] } } })
    const sent: Record<string, string> = {
      'x-LogLevel': '2',
      Cookie: 'session=cookie-secret-1',
      'Set-Cookie': 'id=cookie-secret-2',
      'Proxy-Authorization': 'Basic cHJveHktc2VjcmV0LTM=',
      'X-Forwarded-Authorization': 'Bearer forwarded-secret-4',
      'X-Auth-Token': 'token-secret-5',
      'X-API-Key': 'apikey-secret-6',
      'X-Internal-Sig': 'configured-secret-7',
      'X-Trace-Id': 'trace-1234',
    }
    const call = await service.call('GET', '/Api/Read/Acl', { headers: sent })
    t.equal(call.status, 200)
    const log = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: Number(call.headers.get('x-requestid')) } })
    t.equal(log.status, 200, log.text)
    const raw = JSON.parse(log.json.Raw_Request)
    t.match(raw.headers, {
      cookie: '[redacted]',
      'set-cookie': '[redacted]',
      'proxy-authorization': '[redacted]',
      'x-forwarded-authorization': '[redacted]',
      'x-auth-token': '[redacted]',
      'x-api-key': '[redacted]',
      'x-internal-sig': '[redacted]',
      'x-apikey': '[redacted]',
      'x-apihmac': '[redacted]',
      'x-trace-id': 'trace-1234',
      'x-loglevel': '2',
    })
    for (let index = 1; index <= 7; index++) t.notMatch(log.json.Raw_Request, new RegExp(`secret-${index}|cHJveHktc2VjcmV0LTM`), `credential ${index} is not stored`)
    const stored = await service.kernel.database.db.selectFrom('api_log').select('raw_request').execute()
    for (const row of stored) t.notMatch(row.raw_request ?? '', /secret-\d|cHJveHktc2VjcmV0LTM/, 'nor in the table')
  }),
)

t.test('a secret field in a JSON body is redacted from Raw_Request, as in the answer', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    const secret = 'whsec_' + Buffer.alloc(32, 7).toString('base64')
    const created = await service.call('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: ['key.changed'], Secret: secret }, today: true, headers: { 'x-LogLevel': '2' } })
    t.equal(created.status, 200, created.text)
    const refused = await service.call('POST', '/Api/Create/Webhook', { body: { Url: 'ftp://x', Events: ['key.changed'], Secret: secret }, today: true, headers: { 'x-LogLevel': '2' } })
    t.equal(refused.status, 400)
    for (const call of [created, refused]) {
      const log = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: Number(call.headers.get('x-requestid')) } })
      t.equal(log.status, 200, log.text)
      t.same(JSON.parse(JSON.parse(log.json.Raw_Request).body), { Url: call === created ? receiver.url : 'ftp://x', Events: ['key.changed'], Secret: '[redacted]' })
    }
    const stored = await service.kernel.database.db.selectFrom('api_log').select('raw_request').execute()
    t.notOk(stored.some((row) => (row.raw_request ?? '').includes(secret.slice(6, 30))), 'the secret is nowhere in the log table')
    const plain = rawRequest({ method: 'POST', url: '/x', rawHeaders: [] }, Buffer.from('{"Note": "keeps its spacing"}'), () => false)
    t.equal(JSON.parse(plain).body, '{"Note": "keeps its spacing"}', 'a body without such a field is stored as sent')
    const notJson = rawRequest({ method: 'POST', url: '/x', rawHeaders: [] }, Buffer.from('secret=1&x'), () => false)
    t.equal(JSON.parse(notJson).body, 'secret=1&x', 'a body that is no JSON is stored as sent')
    const broken = (text: string) => JSON.parse(rawRequest({ method: 'POST', url: '/x', rawHeaders: [] }, Buffer.from(text), () => false)).body
    t.equal(broken(`{"Url":"x","Secret":"${secret}",}`), '{"Url":"x","Secret":"[redacted]",}', 'a trailing comma: the secret member is redacted in the text')
    t.equal(broken(`{"Secret" : "${secret}`), '{"Secret" : "[redacted]"', 'a cut-off body too')
    t.equal(broken('{"OldSecretEnds":"Mon, 23 Nov 2026", "x":'), '{"OldSecretEnds":"Mon, 23 Nov 2026", "x":', 'a date is no secret')
    const malformed = await service.call('POST', '/Api/Create/Webhook', { rawBody: `{"Url":"${receiver.url}","Events":["key.changed"],"Secret":"${secret}",}`, today: true, headers: { 'x-LogLevel': '2' } })
    t.equal(malformed.status, 400)
    const malformedLog = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: Number(malformed.headers.get('x-requestid')) } })
    t.notOk(malformedLog.text.includes(secret.slice(6, 30)), 'a body refused as no JSON keeps no secret in the log')
  }),
)

t.test('headers are still judged one by one after a client has sent hundreds of made-up names', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // Decisions are remembered for a few hundred names only; names past them are tested each time.
    const service = await startService(t, { kind })
    const invented: Record<string, string> = { 'x-LogLevel': '2' }
    for (let index = 0; index < 300; index++) invented[`X-Made-Up-${index}`] = `plain-${index}`
    t.equal((await service.call('GET', '/Api/Read/Acl', { headers: invented })).status, 200)
    const call = await service.call('GET', '/Api/Read/Acl', { headers: { 'x-LogLevel': '2', 'X-Session-Late': 'late-secret', 'X-Made-Up-299': 'plain-299', 'X-Never-Seen': 'kept' } })
    const log = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: Number(call.headers.get('x-requestid')) } })
    t.match(JSON.parse(log.json.Raw_Request).headers, { 'x-session-late': '[redacted]', 'x-made-up-299': 'plain-299', 'x-never-seen': 'kept' })
  }),
)

t.test('log.redactHeaders: an array of header names, default empty', async (t) => {
  t.same(loadConfig({}, {}).log.redactHeaders, [])
  t.throws(() => loadConfig({ log: { ...loadConfig({}, {}).log, redactHeaders: ['Bad Header:'] } }, {}), { message: /^invalid setting log.redactHeaders.0: must match pattern/ })
})

t.test('Raw_Request keeps every header as sent: repeats, odd text, __proto__ and constructor, many lines', async (t) => {
  const redacted = (name: string) => name === 'x-apikey' || name === 'cookie'
  const request = (rawHeaders: string[], method = 'POST', url = '/v1.0/Api/Read/Log?x="1"') => ({ method, url, rawHeaders })
  // What the text must equal: every line as sent, names lower-cased, repeats as arrays in order.
  const reference = (rawHeaders: string[], method: string, url: string, body: string) => {
    const headers: Record<string, string | string[]> = Object.create(null)
    for (let index = 0; index < rawHeaders.length; index += 2) {
      const name = rawHeaders[index].toLowerCase()
      const value = redacted(name) ? '[redacted]' : rawHeaders[index + 1]
      const earlier = headers[name]
      headers[name] = earlier === undefined ? value : Array.isArray(earlier) ? [...earlier, value] : [earlier, value]
    }
    return JSON.stringify({ method, url, headers, body })
  }

  const simple = JSON.parse(rawRequest(request(['Host', 'a:1', 'X-ApiKey', 'k', 'X-LogLevel', '2']), Buffer.from('{"a":"\u00e9"}'), redacted))
  t.same(simple, { method: 'POST', url: '/v1.0/Api/Read/Log?x="1"', headers: { host: 'a:1', 'x-apikey': '[redacted]', 'x-loglevel': '2' }, body: '{"a":"\u00e9"}' })
  t.same(Object.keys(simple.headers), ['host', 'x-apikey', 'x-loglevel'], 'in the order sent')
  t.same(JSON.parse(rawRequest(request(['Accept', 'a', 'accept', 'b', 'Cookie', 's=1', 'ACCEPT', 'c', 'cookie', 's=2']), undefined, redacted)).headers,
    { accept: ['a', 'b', 'c'], cookie: ['[redacted]', '[redacted]'] }, 'a repeated name: an array, credentials still redacted')
  const proto = JSON.parse(rawRequest(request(['__proto__', '{"polluted":1}', 'X-A', '1']), undefined, redacted))
  t.same(Object.keys(proto.headers), ['__proto__', 'x-a'], 'a header named __proto__ is kept as a header')
  t.equal(Object.getPrototypeOf(proto.headers), Object.prototype)
  const odd = ['X-Quote', 'say "hi" \\ there', 'X-Latin', 'caf\u00e9 \u00ff\t\u0085', 'X-Json', '{"a":[1]}']
  t.equal(rawRequest(request(odd), undefined, redacted), reference(odd, 'POST', '/v1.0/Api/Read/Log?x="1"', ''), 'quotes, backslashes, latin1 and tabs')
  const many = Array.from({ length: 40 }, (_, index) => [`X-H${index % 35}`, `v${index}`]).flat()
  t.equal(rawRequest(request(many), undefined, redacted), reference(many, 'POST', '/v1.0/Api/Read/Log?x="1"', ''), 'forty lines, some repeated')
  const long = Buffer.from('x'.repeat(70_000))
  t.match(JSON.parse(rawRequest(request([]), long, redacted)), { headers: {}, body: /^x{65536}\.\.\.\[4464 more characters\]$/ }, 'no headers; the body clipped at 64 KiB')

  // Random header sets from a few names (so repeats come and go) against the reference, text for text.
  const pool = ['Host', 'Accept', 'accept', 'X-ApiKey', 'Cookie', 'X-Trace', 'User-Agent', '__proto__', 'constructor']
  let seed = 7
  const next = (below: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % below
  for (let round = 0; round < 300; round++) {
    const headers = Array.from({ length: next(12) }, () => [pool[next(pool.length)], `v"${next(1000)}\u00e9`]).flat()
    const body = round % 3 === 0 ? '' : `{"n":${round}}`
    const text = rawRequest(request(headers, 'GET', `/r/${round}`), body === '' ? undefined : Buffer.from(body), redacted)
    if (text !== reference(headers, 'GET', `/r/${round}`, body)) {
      t.fail(`round ${round}: ${JSON.stringify(headers)} gave ${text}`)
      return
    }
  }
  t.pass('300 random header sets: the same text as the reference')
})
