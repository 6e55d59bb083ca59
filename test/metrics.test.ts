/**
 * Prometheus metrics on their own listener: parsed by a real text-format parser,
 * counters moving with the calls made (by route and status, refusals by reason,
 * rate-limit refusals, cache hits), the log queue and process metrics present.
 */
import t from 'tap'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { spawn } from 'node:child_process'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { watchChild, workerPids } from './helpers/childService.ts'
import { forEachDatabase, startService } from './helpers/service.ts'
import { freePort } from './helpers/freePort.ts'
import { insertKey } from './helpers/keys.ts'
import { scrape, sample } from './helpers/prometheus.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'

t.test('metrics count calls, refusals and cache hits', async (t) => {
  await forEachDatabase(t, async (t, kind) => {
    const metricsPort = await freePort()
    const service = await startService(t, { kind, config: { metrics: { port: metricsPort, host: '127.0.0.1' } } })
    const url = `http://127.0.0.1:${metricsPort}/metrics`

    const before = await scrape(url)
    t.equal(before.status, 200)
    t.match(before.contentType, /^text\/plain; version=0\.0\.4/)
    t.equal(sample(before.families, 'keygate_http_requests_total'), 0, 'no call yet')
    t.equal(sample(before.families, 'keygate_call_log_queue_max'), 20000)
    t.ok(before.families.has('keygate_call_log_queue_depth'), 'log queue depth')
    t.ok(before.families.has('process_cpu_user_seconds_total'), 'Node process metrics')
    t.ok(before.families.has('nodejs_eventloop_lag_seconds'), 'Node runtime metrics')
    t.equal(sample(before.families, 'keygate_info', { version: JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version }), 1)

    for (let index = 0; index < 3; index++) t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200)
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: null })).status, 401)
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: { apiKey: 'kg_nobody', secret: 'x' } })).status, 401)
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: { ...service.admin, secret: 'wrong' } })).status, 401)
    t.equal((await service.call('GET', '/Api/Read/Acl', { date: 'yesterday' })).status, 401)
    t.equal((await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'x', GroupId: 1 } })).status, 401, 'no day code')
    // A captured write sent again, and a credential given twice.
    const body = JSON.stringify({ FirstName: 'Ada', LastName: 'Lovelace' })
    const captured = { ...signedHeaders(service.admin, 'POST', '/People/Update/OneChange', body), 'content-type': 'application/json' }
    const sent = await Promise.all([0, 1].map(() => fetch(`${service.base}/People/Update/OneChange`, { method: 'POST', headers: captured, body }).then((response) => response.status)))
    t.same(sent.sort(), [200, 401], 'one of the two is a replay')
    const twice = await fetch(`${service.base}/Api/Read/Keys`, { headers: [['x-apikey', service.admin.apiKey], ['x-apikey', service.admin.apiKey], ['x-apidate', new Date().toUTCString()], ['x-apihmac', 'x']] })
    t.equal(twice.status, 401)
    const limited = await insertKey(service, { max_hits: '1/1Min' })
    t.equal((await service.call('GET', '/Api/Read/Limits', { key: limited })).status, 200)
    t.equal((await service.call('GET', '/Api/Read/Limits', { key: limited })).status, 429)
    const spent = await insertKey(service, { credits: 0 })
    const noCredits = await service.call('GET', '/Access/Level/List', { key: spent })
    t.equal(noCredits.status, 429, noCredits.text)
    const guesser = await insertKey(service)
    let guessed = 0
    for (let guess = 0; guess < 11; guess++) guessed = (await service.call('POST', '/Api/Create/Key', { key: guesser, today: '00000000', body: { Display_Name: 'x', GroupId: 1 } })).status
    t.equal(guessed, 429, 'the eleventh wrong day code is a lockout')
    t.equal((await service.call('GET', '/No/Such/Route')).status, 404)
    t.equal((await service.call('POST', '/Api/Read/Keys', { body: {} })).status, 404, 'a known path, another method')

    const after = await scrape(url)
    const f = after.families
    t.equal(sample(f, 'keygate_http_requests_total', { route: '/Api/Read/Acl', method: 'GET', status: '200' }), 3)
    t.equal(sample(f, 'keygate_http_requests_total', { route: '/Api/Read/Acl', method: 'GET', status: '401' }), 4)
    t.equal(sample(f, 'keygate_http_requests_total', { route: '/Api/Read/Limits', status: '429' }), 1)
    t.equal(sample(f, 'keygate_http_requests_total', { route: '(no route)', method: 'GET', status: '404' }), 1, 'a call no route matches is counted too')
    t.equal(sample(f, 'keygate_http_requests_total', { route: '(no route)', method: 'POST', status: '404' }), 1)
    t.equal(sample(f, 'keygate_auth_refusals_total', { reason: 'missing_credentials' }), 1)
    t.equal(sample(f, 'keygate_auth_refusals_total', { reason: 'unknown_key' }), 1)
    t.equal(sample(f, 'keygate_auth_refusals_total', { reason: 'bad_signature' }), 1)
    t.equal(sample(f, 'keygate_auth_refusals_total', { reason: 'bad_date' }), 1)
    t.equal(sample(f, 'keygate_auth_refusals_total', { reason: 'day_code' }), 11, 'the call without one and the ten wrong ones')
    t.equal(sample(f, 'keygate_auth_refusals_total', { reason: 'replay' }), 1)
    t.equal(sample(f, 'keygate_auth_refusals_total', { reason: 'malformed_credentials' }), 1, 'x-apikey given twice')
    t.equal(sample(f, 'keygate_auth_refusals_total', { reason: 'other' }), 0, 'every 401 of the kernel names its reason')
    t.equal(sample(f, 'keygate_rate_limit_refusals_total', { route: '/Api/Read/Limits' }), 1)
    t.equal(sample(f, 'keygate_credit_refusals_total', { route: '/Access/Level/List' }), 1, 'a key out of credits')
    t.equal(sample(f, 'keygate_auth_refusals_total', { reason: 'day_code_lockout' }), 1, 'is no day-code lockout; the guesser\'s is')
    // /Api/Read/Acl is cached: the first call fills the cache, the next two are hits.
    t.equal(sample(f, 'keygate_response_cache_lookups_total', { route: '/Api/Read/Acl' }), 3)
    t.equal(sample(f, 'keygate_response_cache_hits_total', { route: '/Api/Read/Acl' }), 2)
    const latency = f.get('keygate_http_request_duration_seconds')
    t.equal(latency?.type, 'HISTOGRAM')
    t.match(after.text, /^keygate_http_request_duration_seconds_count\{route="\/Api\/Read\/Acl",method="GET"\} 7$/m, 'the latency histogram counts the seven /Api/Read/Acl calls')
    t.equal(sample(f, 'keygate_database_errors_total'), 0)

    // Written log batches are timed.
    await new Promise((resolve) => setTimeout(resolve, 300))
    const flushed = await scrape(url)
    t.ok(flushed.families.get('keygate_call_log_flush_seconds')?.metrics.some((metric) => Number(metric.buckets?.['+Inf']) >= 1), 'flush time observed')

    const other = await fetch(`http://127.0.0.1:${metricsPort}/other`)
    t.equal(other.status, 404)
    t.equal(await other.text(), 'Error: Not found.')
    const onService = await fetch(`http://127.0.0.1:${service.port}/metrics`)
    t.equal(onService.status, 404, 'metrics are not on the service port')
    await onService.text()
  })
})

t.test('metrics are off by default (port 0) and bound to 127.0.0.1 when on', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  t.same(service.config.metrics, { port: 0, host: '127.0.0.1' })
  const port = await freePort()
  const next = await service.restart({ metrics: { port, host: '127.0.0.1' } })
  const answer = await scrape(`http://127.0.0.1:${port}/metrics`)
  t.equal(answer.status, 200)
  await next.stop()
  await t.rejects(fetch(`http://127.0.0.1:${port}/metrics`), 'the metrics listener closes with the kernel')
})

t.test('WORKERS=2: one scrape counts the calls of every worker, the same on every scrape', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-metrics-workers-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const [port, metricsPort] = [await freePort(), await freePort()]
  const env: Record<string, string | undefined> = { ...process.env, DATA_DIR: dataDir, PORT: String(port), WORKERS: '2', METRICS_PORT: String(metricsPort) }
  delete env.DATABASE_URL
  delete env.REDIS_URL
  const child = spawn(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  const { waitFor, exited, output } = watchChild(t, child)
  await waitFor('2 workers')
  const url = `http://127.0.0.1:${metricsPort}/metrics`
  const workers = workerPids(child.pid!)
  t.equal(workers.length, 2, 'two worker processes')
  // A worker that has never answered (frozen before the first scrape) has no numbers to
  // serve: that scrape fails, 503, and the service log says why.
  process.kill(workers[1], 'SIGSTOP')
  try {
    const never = await fetch(url, { signal: AbortSignal.timeout(20_000) })
    t.equal(never.status, 503)
    t.equal(await never.text(), 'Error: Metrics unavailable, try again shortly.')
    t.match(output.text, /metrics: a scrape failed, answered 503/, 'said in the service log')
  } finally {
    process.kill(workers[1], 'SIGCONT')
  }
  const refused = async () => sample((await scrape(url)).families, 'keygate_auth_refusals_total', { reason: 'missing_credentials' })
  const before = await refused()
  // A new connection per call, so the calls spread over both workers.
  for (let index = 0; index < 20; index++) {
    const answer = await fetch(`http://127.0.0.1:${port}/v1.0/Api/Read/Acl`, { headers: { connection: 'close' } })
    t.equal(answer.status, 401)
    await answer.text()
  }
  const seen = []
  for (let index = 0; index < 6; index++) seen.push(await refused())
  t.same(seen, Array(6).fill(before + 20), 'every scrape holds all 20 refusals, whichever worker answered them')
  const text = (await scrape(url)).text
  t.match(text, /^keygate_info\{version="[^"]+"\} 1$/m, 'the version once, not once per worker')
  t.match(text, /^process_cpu_user_seconds_total /m, 'process metrics too')

  // A frozen worker (SIGSTOP) cannot answer the primary: after 5 s the scrape serves its
  // last numbers (its counters stand still rather than leave the sum, which Prometheus would
  // read as a counter reset), says so in a gauge and in the service log. It was a 503,
  // every scrape, for as long as the worker stayed frozen.
  t.equal(sample((await scrape(url)).families, 'keygate_metrics_workers_unanswered', {}), 0, 'every worker answered')
  process.kill(workers[0], 'SIGSTOP')
  try {
    // Calls the other worker answers while the first is frozen are counted.
    for (let index = 0; index < 5; index++) {
      const answer = await fetch(`http://127.0.0.1:${port}/v1.0/Api/Read/Acl`, { headers: { connection: 'close' }, signal: AbortSignal.timeout(2_000) }).catch(() => null)
      await answer?.text()
    }
    const started = Date.now()
    const frozen = await scrape(url)
    t.equal(frozen.status, 200, 'still answered')
    t.ok(Date.now() - started >= 4_500, 'after waiting 5 s for the frozen worker')
    t.equal(sample(frozen.families, 'keygate_metrics_workers_unanswered', {}), 1, 'one worker served from its last answer')
    t.ok(sample(frozen.families, 'keygate_auth_refusals_total', { reason: 'missing_credentials' }) >= before + 20, 'no counter went back')
    t.match(frozen.text, /^keygate_info\{version="[^"]+"\} 1$/m)
    t.match(output.text, new RegExp(`metrics: worker pid ${workers[0]} did not answer within 5 s \\(frozen or busy\\?\\); its last numbers were served`), 'said in the service log')
  } finally {
    process.kill(workers[0], 'SIGCONT')
  }
  const thawed = await scrape(url)
  t.equal(thawed.status, 200, 'answered again once the worker runs')
  t.equal(sample(thawed.families, 'keygate_metrics_workers_unanswered', {}), 0)
  child.kill('SIGTERM')
  t.equal((await exited).code, 0, 'stops with exit 0')
  await t.rejects(fetch(url), 'the metrics listener closes with the primary')
})
