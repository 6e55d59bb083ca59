/**
 * /healthz and /readyz: outside the base path, no credentials, `ok`/`not ready` and
 * nothing more; readyz is 503 while MariaDB is down and 200 again after, without a
 * restart (a private mariadbd, never the shared server).
 */
import t from 'tap'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { forEachDatabase, startService } from './helpers/service.ts'
import { PrivateMariadb } from './helpers/privateMariadb.ts'
import { freePort } from './helpers/freePort.ts'
import { scrape, sample } from './helpers/prometheus.ts'
import { healthResponder, type ReadinessChecks } from '../kernel/http/health.ts'

async function get(url: string, method = 'GET') {
  const response = await fetch(url, { method })
  return { status: response.status, text: await response.text(), headers: response.headers }
}

t.test('healthz and readyz answer without credentials, outside the base path', async (t) => {
  await forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const root = `http://127.0.0.1:${service.port}`
    const health = await get(`${root}/healthz`)
    t.same([health.status, health.text], [200, 'ok'])
    t.equal(health.headers.get('content-type'), 'text/plain; charset=utf-8')
    t.equal(health.headers.get('cache-control'), 'no-store')
    const ready = await get(`${root}/readyz`)
    t.same([ready.status, ready.text], [200, 'ok'])
    t.same([(await get(`${root}/readyz?verbose=1`)).text], ['ok'], 'no detail on request')
    const head = await get(`${root}/readyz`, 'HEAD')
    t.same([head.status, head.text], [200, ''])
    const post = await get(`${root}/healthz`, 'POST')
    t.same([post.status, post.text, post.headers.get('allow')], [405, 'Error: Method not allowed.', 'GET, HEAD'])
    t.equal((await get(`${service.base}/healthz`)).status, 404, 'not under the base path')
    t.equal((await get(`${root}/healthz/more`)).status, 404)
    // Not a call: no request id, not in the call log.
    t.equal(health.headers.get('x-requestid'), null)
  })
})

t.test('readyz is 503 while MariaDB is down and 200 after; database errors are counted', async (t) => {
  const mariadb = await PrivateMariadb.create()
  t.teardown(() => mariadb.destroy())
  const metricsPort = await freePort()
  const service = await startService(t, { kind: 'sqlite', config: { databaseUrl: mariadb.url, metrics: { port: metricsPort, host: '127.0.0.1' } } })
  const readyz = `http://127.0.0.1:${service.port}/readyz`
  t.same(await get(readyz).then((answer) => [answer.status, answer.text]), [200, 'ok'])

  await mariadb.stop()
  const down = await get(readyz)
  t.same([down.status, down.text], [503, 'not ready'], 'no detail about what is down')
  t.same(await get(`http://127.0.0.1:${service.port}/healthz`).then((answer) => [answer.status, answer.text]), [200, 'ok'], 'still alive')
  const call = await service.call('GET', '/Api/Read/Keys')
  t.equal(call.status, 503)
  const metrics = await scrape(`http://127.0.0.1:${metricsPort}/metrics`)
  t.ok(sample(metrics.families, 'keygate_database_errors_total') >= 1, 'the outage is counted')

  await mariadb.start()
  let status = 0
  for (let attempt = 0; attempt < 100 && status !== 200; attempt++) {
    status = (await get(readyz)).status
    if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.equal(status, 200, 'ready again without a restart')
})

t.test('readyz: a full log queue or a shutdown makes it 503', async (t) => {
  const state = { queued: 0, closing: false, ping: true }
  const checks: ReadinessChecks = {
    ping: () => (state.ping ? Promise.resolve() : new Promise(() => {})),
    logQueue: () => ({ queued: state.queued, max: 10 }),
    closing: () => state.closing,
  }
  const respond = healthResponder(checks)
  const server: Server = createServer((request, response) => {
    if (!respond(request, response)) response.writeHead(404).end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`
  t.equal((await get(url)).status, 200)
  state.queued = 10
  t.equal((await get(url)).status, 503, 'log queue at its bound')
  state.queued = 9
  t.equal((await get(url)).status, 200)
  state.closing = true
  t.equal((await get(url)).status, 503, 'shutting down')
  state.closing = false
  state.ping = false
  const hanging = await get(url)
  t.same([hanging.status, hanging.text], [503, 'not ready'], 'a database that does not answer within its timeout')
})
