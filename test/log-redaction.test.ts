/**
 * Issue 12, item 5: LogLevel 2 stores the raw request with every header that carries a
 * credential redacted: Cookie, Set-Cookie, Proxy-Authorization, any kind of
 * Authorization, token/API-key style headers, and those named in `log.redactHeaders`.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'
import { loadConfig } from '../kernel/boot/config.ts'

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
