/**
 * Remote_Addr behind a proxy: X-Forwarded-For / Forwarded are believed from a peer in
 * trustProxy (rightmost address that is not itself a trusted proxy) and ignored from
 * anyone else. Checked in the stored log record and in the access line.
 */
import t from 'tap'
import { Writable } from 'node:stream'
import { pino } from 'pino'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { clientAddress } from '../kernel/http/clientAddress.ts'
import type { IncomingMessage } from 'node:http'

async function remoteAddr(service: Service, headers: Record<string, string>): Promise<string> {
  const answer = await service.call('GET', '/Api/Read/Acl', { headers })
  const id = Number(answer.headers.get('x-requestid'))
  const record = await service.kernel.services.callLog.find(id, service.admin.id)
  return record!.Remote_Addr as string
}

t.test('forwarding headers from a trusted peer give Remote_Addr; from others they are ignored', async (t) => {
  await forEachDatabase(t, async (t, kind) => {
    const lines: Record<string, unknown>[] = []
    const logger = pino({ level: 'info' }, new Writable({ write(chunk, _encoding, done) { lines.push(JSON.parse(String(chunk))); done() } }))
    const trusted = await startService(t, { kind, logger, config: { trustProxy: ['127.0.0.1', '10.0.0.2'], log: { detailDays: 7, recordDays: 30, batchSize: 500, flushMs: 50, queueMax: 20000, purgeEveryMs: 60000, purgeBatch: 1000, access: 'all' } } })
    t.equal(await remoteAddr(trusted, { 'X-Forwarded-For': '203.0.113.7' }), '203.0.113.7', 'one proxy')
    t.equal(await remoteAddr(trusted, { 'X-Forwarded-For': '198.51.100.1, 203.0.113.7, 10.0.0.2' }), '203.0.113.7', 'the rightmost address that is not a trusted proxy')
    t.equal(await remoteAddr(trusted, { 'X-Forwarded-For': '1.1.1.1, ::ffff:203.0.113.8' }), '203.0.113.8', 'IPv4-mapped spelled plainly')
    t.equal(await remoteAddr(trusted, { Forwarded: 'for=198.51.100.17;proto=https, for="[2001:db8::1]:4711"' }), '2001:db8::1', 'Forwarded for= (RFC 7239)')
    t.equal(await remoteAddr(trusted, { Forwarded: 'for=198.51.100.17', 'X-Forwarded-For': '192.0.2.9' }), '198.51.100.17', 'Forwarded wins over X-Forwarded-For')
    t.equal(await remoteAddr(trusted, { 'X-Forwarded-For': 'unknown' }), '127.0.0.1', 'a hop that is no address ends the walk')
    t.equal(await remoteAddr(trusted, {}), '127.0.0.1', 'no header: the peer')
    const access = lines.filter((line) => line.msg === 'call')
    t.equal(access.length, 7, 'one access line per call')
    t.same(access.map((line) => line.remoteAddr), ['203.0.113.7', '203.0.113.7', '203.0.113.8', '2001:db8::1', '198.51.100.17', '127.0.0.1', '127.0.0.1'])

    const untrusted = await startService(t, { kind, config: { trustProxy: ['10.0.0.2'] } })
    t.equal(await remoteAddr(untrusted, { 'X-Forwarded-For': '203.0.113.7' }), '127.0.0.1', 'an untrusted peer cannot choose its address')
    t.equal(await remoteAddr(untrusted, { Forwarded: 'for=203.0.113.7' }), '127.0.0.1')
    const none = await startService(t, { kind })
    t.equal(await remoteAddr(none, { 'X-Forwarded-For': '203.0.113.7' }), '127.0.0.1', 'no trustProxy: headers ignored')
  })
})

t.test('clientAddress on its own', async (t) => {
  const request = (peer: string, headers: Record<string, string[]>) => ({ socket: { remoteAddress: peer }, headersDistinct: headers }) as unknown as IncomingMessage
  const of = clientAddress(new Set(['10.0.0.1', '10.0.0.2']))
  t.equal(of(request('10.0.0.1', { 'x-forwarded-for': ['192.0.2.1', '10.0.0.2'] })), '192.0.2.1', 'header repeated on several lines, read as one list')
  t.equal(of(request('10.0.0.1', { 'x-forwarded-for': ['10.0.0.2, 10.0.0.1'] })), '10.0.0.2', 'all hops trusted: the farthest one')
  t.equal(of(request('10.0.0.1', { 'x-forwarded-for': ['192.0.2.1:5555'] })), '192.0.2.1', 'a port is taken off')
  t.equal(of(request('10.0.0.1', { forwarded: ['for=_hidden, for=192.0.2.3'] })), '192.0.2.3')
  t.equal(of(request('10.0.0.1', { forwarded: ['for=192.0.2.3, for=_hidden'] })), '10.0.0.1', 'an obfuscated nearest hop: the peer')
  t.equal(of(request('192.0.2.50', { 'x-forwarded-for': ['1.2.3.4'] })), '192.0.2.50')
})
