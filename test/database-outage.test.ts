import t from 'tap'
import { startService } from './helpers/service.ts'
import { probePlugin } from './helpers/probePlugin.ts'
import { PrivateMariadb } from './helpers/privateMariadb.ts'
import { fastWebhooks } from './helpers/webhookReceiver.ts'
import { createLogger } from '../kernel/observe/logger.ts'

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
