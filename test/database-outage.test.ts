import t from 'tap'
import { startService } from './helpers/service.ts'
import { probePlugin } from './helpers/probePlugin.ts'
import { PrivateMariadb } from './helpers/privateMariadb.ts'
import { fastWebhooks } from './helpers/webhookReceiver.ts'
import { createLogger } from '../kernel/observe/logger.ts'
import { isStoreOutage } from '../kernel/storage/database.ts'

t.test('MariaDB stops and starts again: 503 meanwhile, recovery without a restart, no record lost', async (t) => {
  const mariadb = await PrivateMariadb.create()
  t.teardown(() => mariadb.destroy())
  const lines: string[] = []
  const logger = createLogger({ destination: { write: (line: string) => void lines.push(line) } })
  // The webhook sender polls every 50 ms: during the outage each of its rounds fails.
  const service = await startService(t, { kind: 'sqlite', plugins: [probePlugin], logger, config: { ...fastWebhooks, databaseUrl: mariadb.url, log: { detailDays: 7, recordDays: 30, batchSize: 50, flushMs: 20, queueMax: 20000, purgeEveryMs: 60000, purgeBatch: 1000 } } })
  const okIds: string[] = []
  const record = (answer: { status: number; headers: Headers }) => {
    if (answer.status === 200) okIds.push(answer.headers.get('x-requestid')!)
    return answer.status
  }
  for (let index = 0; index < 20; index++) t.equal(record(await service.call('GET', '/Probe/Count')), 200)

  await mariadb.stop()
  const down = await service.call('GET', '/Probe/Count')
  t.equal(down.status, 503, 'a call that needs the database answers 503')
  t.equal(down.text, 'Error: Service temporarily unavailable, try again shortly.')
  t.equal(down.headers.get('retry-after'), '2')
  // The key is cached: calls that need no query still work, and their records wait in the queue.
  for (let index = 0; index < 10; index++) t.equal(record(await service.call('GET', '/Probe/Echo')), 200)

  await new Promise((resolve) => setTimeout(resolve, 1500))
  const senderLines = lines.map((line) => JSON.parse(line) as { level: string; plugin?: string; msg: string }).filter((line) => line.plugin === 'webhooks')
  t.same(senderLines.filter((line) => line.level === 'error'), [], 'the webhook sender logs no error line (and stack) per failed round')
  t.ok(senderLines.filter((line) => line.msg === 'database unavailable').length <= 1, 'at most one outage warning in 5 s')

  await mariadb.start()
  let recovered = 0
  for (let attempt = 0; attempt < 100 && recovered === 0; attempt++) {
    const answer = await service.call('GET', '/Probe/Count')
    if (record(answer) === 200) recovered++
    else await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.equal(recovered, 1, 'the same service answers again once the database is back')

  await service.stop() // flushes the queue
  const { createConnection } = await import('mysql2/promise')
  const connection = await createConnection({ host: '127.0.0.1', port: mariadb.port, user: 'root', database: 'keygate' })
  const [rows] = await connection.query('select id from api_log where id in (?)', [okIds.map(Number)])
  await connection.end()
  t.equal((rows as unknown[]).length, okIds.length, `every one of the ${okIds.length} answered calls has its log record`)
})

t.test('MariaDB stays away while calls keep coming: once the log queue is full, a new call is a prompt 503, not a wait for the whole outage', async (t) => {
  const mariadb = await PrivateMariadb.create()
  t.teardown(() => mariadb.destroy())
  const queueMax = 20
  const service = await startService(t, { kind: 'sqlite', plugins: [probePlugin], config: { databaseUrl: mariadb.url, log: { detailDays: 7, recordDays: 30, batchSize: 50, flushMs: 20, queueMax, purgeEveryMs: 60000, purgeBatch: 1000 } } })
  const okIds: string[] = []
  t.equal((await service.call('GET', '/Probe/Count')).status, 200)
  await mariadb.stop()
  // The key is cached and /Probe/Echo needs no query: its answers are 200, their records queued.
  const first = await service.call('GET', '/Probe/Echo')
  t.equal(first.status, 200)
  okIds.push(first.headers.get('x-requestid')!)
  // The log's writes have failed by now: the service knows the database is away.
  await new Promise((resolve) => setTimeout(resolve, 1500))
  const answers: string[] = []
  let refused: Awaited<ReturnType<typeof service.call>> | null = null
  for (let index = 0; index < 2 * queueMax && refused === null; index++) {
    const started = Date.now()
    const answer = await Promise.race([service.call('GET', '/Probe/Echo'), new Promise<null>((resolve) => setTimeout(() => resolve(null), 3000))])
    if (answer === null) {
      answers.push('no answer in 3 s')
      break
    }
    answers.push(`${answer.status} in ${Date.now() - started} ms`)
    if (answer.status === 200) okIds.push(answer.headers.get('x-requestid')!)
    else refused = answer
  }
  t.not(refused, null, `a call is refused once the queue is full (${answers.join(', ')})`)
  t.ok(okIds.length <= queueMax, `at most queueMax answered calls hold records in the queue (${okIds.length})`)
  t.equal(refused?.status, 503)
  t.equal(refused?.text, 'Error: Service temporarily unavailable, try again shortly.')
  t.equal(refused?.headers.get('retry-after'), '2')
  t.equal(refused?.headers.get('x-requestid'), null, 'refused before it was authenticated: no request id, no record to keep')

  await mariadb.start()
  let recovered = false
  for (let attempt = 0; attempt < 100 && !recovered; attempt++) {
    const answer = await service.call('GET', '/Probe/Echo')
    if (answer.status === 200) {
      recovered = true
      okIds.push(answer.headers.get('x-requestid')!)
    } else await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.ok(recovered, 'the service answers again once the queue is written')
  await service.stop()
  const { createConnection } = await import('mysql2/promise')
  const connection = await createConnection({ host: '127.0.0.1', port: mariadb.port, user: 'root', database: 'keygate' })
  const [rows] = await connection.query('select id from api_log where id in (?)', [okIds.map(Number)])
  await connection.end()
  t.equal((rows as unknown[]).length, okIds.length, `every one of the ${okIds.length} answered calls has its log record`)
})

t.test('MariaDB stops answering (paused, connections open): 503 within the time limit, recovery by itself, no record lost', async (t) => {
  const mariadb = await PrivateMariadb.create()
  t.teardown(() => mariadb.destroy())
  const limitMs = 1000
  // Three connections: six calls at once find every one stuck and wait for one.
  const service = await startService(t, { kind: 'sqlite', plugins: [probePlugin], config: { databaseUrl: `${mariadb.url}?connectionLimit=3`, database: { queryTimeoutMs: limitMs }, log: { detailDays: 7, recordDays: 30, batchSize: 50, flushMs: 20, queueMax: 20000, purgeEveryMs: 60000, purgeBatch: 1000 } } })
  const okIds: string[] = []
  // A call with a deadline of its own: without the service's limit it would wait as long as the pause.
  const timed = async (path: string) => {
    const started = Date.now()
    const answer = await Promise.race([service.call('GET', path), new Promise<null>((resolve) => setTimeout(resolve, 4 * limitMs + 2000, null))])
    if (answer?.status === 200) okIds.push(answer.headers.get('x-requestid')!)
    return { status: answer?.status ?? 'no answer', text: answer?.text, retryAfter: answer?.headers.get('retry-after'), ms: Date.now() - started }
  }
  const statuses = async (path: string, count: number) => (await Promise.all(Array.from({ length: count }, () => timed(path)))).map((answer) => answer.status)
  t.same(await statuses('/Probe/Count', 6), Array(6).fill(200))

  mariadb.pause()
  t.teardown(() => mariadb.resume())
  const down = await Promise.all(Array.from({ length: 6 }, () => timed('/Probe/Count')))
  t.same(down.map((answer) => answer.status), Array(6).fill(503), 'every call that needs the database answers 503')
  t.equal(down[0].text, 'Error: Service temporarily unavailable, try again shortly.')
  t.equal(down[0].retryAfter, '2')
  // A statement or a wait for a connection ends at the limit; both at most in one call.
  const slowest = Math.max(...down.map((answer) => answer.ms))
  t.ok(slowest < 2 * limitMs + 1000, `answered within the limit (slowest ${slowest} ms)`)
  t.equal((await timed('/Probe/Count')).status, 503, 'and again, with the pool\'s connections cut off')
  // The call log's writer thread has the same limit: its batch fails as an outage (retried), it does not hang.
  const writing = Date.now()
  const written = await Promise.race([
    service.kernel.database.insertMany('api_log', [{ id: 1 } as never]).then(() => null, (error: unknown) => error),
    new Promise((resolve) => setTimeout(resolve, 4 * limitMs + 2000, new Error('no answer'))),
  ])
  t.ok(isStoreOutage(written), `a batch fails as an outage (${(written as Error)?.message})`)
  t.ok(Date.now() - writing < 2 * limitMs + 1000, `within the limit (${Date.now() - writing} ms)`)
  // Calls that need no query still answer; their records wait in the queue while the writer's batches fail.
  t.same(await statuses('/Probe/Echo', 10), Array(10).fill(200))
  await new Promise((resolve) => setTimeout(resolve, 2 * limitMs))

  mariadb.resume()
  let recovered = false
  for (let attempt = 0; attempt < 100 && !recovered; attempt++) {
    recovered = (await timed('/Probe/Count')).status === 200
    if (!recovered) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.ok(recovered, 'the same service answers again once the database does')
  t.same(await statuses('/Probe/Count', 6), Array(6).fill(200), 'no pooled connection is left stuck')

  const { createConnection } = await import('mysql2/promise')
  const connection = await createConnection({ host: '127.0.0.1', port: mariadb.port, user: 'root', database: 'keygate' })
  t.teardown(() => connection.end())
  // The cut-off connections are gone on the server too: the pool's three and the writer's one at most.
  let open = Infinity
  for (let attempt = 0; attempt < 50 && open > 4; attempt++) {
    const [rows] = await connection.query("select count(*) as n from information_schema.processlist where db = 'keygate' and id <> connection_id()")
    open = Number((rows as { n: number }[])[0].n)
    if (open > 4) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.ok(open <= 4, `no connection leaked (${open} open)`)

  await service.stop() // flushes the queue
  const [rows] = await connection.query('select id from api_log where id in (?)', [okIds.map(Number)])
  t.equal((rows as unknown[]).length, okIds.length, `every one of the ${okIds.length} answered calls has its log record`)
})

t.test('a stop while MariaDB is away: the records it could not write are counted and the stop fails (the process exits 1), in bounded time', async (t) => {
  const mariadb = await PrivateMariadb.create()
  t.teardown(() => mariadb.destroy())
  const service = await startService(t, { kind: 'sqlite', plugins: [probePlugin], config: { databaseUrl: mariadb.url, database: { queryTimeoutMs: 1000 }, log: { detailDays: 7, recordDays: 30, batchSize: 50, flushMs: 20, queueMax: 20000, purgeEveryMs: 60000, purgeBatch: 1000 } } })
  t.equal((await service.call('GET', '/Probe/Echo')).status, 200, 'the key is loaded')
  await mariadb.stop()
  // Served from the loaded key: their records wait in the queue.
  for (let index = 0; index < 5; index++) t.equal((await service.call('GET', '/Probe/Echo')).status, 200)
  const started = Date.now()
  await t.rejects(service.stop(), { message: /^\d+ call log records could not be written before shutdown \(the database did not answer for 10 s\)$/ })
  // 10 s of retries, then the node id and the pool are given up on within their bounds.
  t.ok(Date.now() - started < 25_000, `stopped in ${Date.now() - started} ms`)
})
