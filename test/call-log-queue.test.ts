/**
 * The call log queue on its own (D8): bounded with backpressure, records readable while
 * queued, kept through an outage, all written by close(). The database is a stand-in
 * whose inserts the test holds and releases.
 */
import t from 'tap'
import type { Kysely } from 'kysely'
import { CallLog, type LogRow } from '../kernel/callLog/callLog.ts'
import type { CoreTables } from '../kernel/storage/coreTables.ts'

class HeldStore {
  written: LogRow[] = []
  inserts = 0
  failWith: Error | null = null
  private release: (() => void) | null = null
  held = false

  hold(): void {
    this.held = true
  }

  letGo(): void {
    this.held = false
    this.release?.()
    this.release = null
  }

  asKysely(): Kysely<CoreTables> {
    return {
      insertInto: () => ({
        values: (rows: LogRow | LogRow[]) => ({
          execute: async () => {
            this.inserts++
            if (this.held) await new Promise<void>((resolve) => (this.release = resolve))
            if (this.failWith) throw this.failWith
            this.written.push(...(Array.isArray(rows) ? rows : [rows]))
          },
        }),
      }),
    } as unknown as Kysely<CoreTables>
  }
}

function row(id: number, keyId = 1): LogRow {
  return {
    id, key_id: keyId, request_time: 0, http_host: null, server_name: null, server_addr: null, server_port: null,
    remote_addr: '127.0.0.1', request_scheme: null, request_method: 'GET', api_acl: 1, api_function: '/Api/Read/Acl',
    request_url: null, http_user_agent: null, raw_request: null, response_code: 200, response: null,
    response_format: 'json', seconds: 0.001, bandwidth: 10, detail_until: 0,
  }
}

const options = { batchSize: 2, flushMs: 5, queueMax: 3, detailDays: 7, recordDays: 30, purgeEveryMs: 60_000, purgeBatch: 10 }

t.test('a full queue makes calls wait for room, in order, and loses nothing', async (t) => {
  const store = new HeldStore()
  const log = new CallLog(store.asKysely(), options, Date.now, () => undefined)
  store.hold()
  for (let id = 1; id <= 3; id++) {
    t.equal(log.admit(), undefined, `room for record ${id}`)
    log.append(row(id))
  }
  const order: number[] = []
  const waiting = [4, 5, 6].map((id) => log.admit()!.then(() => {
    order.push(id)
    log.append(row(id))
  }))
  t.equal(waiting.length, 3)
  t.equal(log.queued, 3, 'the queue holds at queueMax')
  t.match(await log.find(2, 1), { Api_Function: '/Api/Read/Acl' }, 'a queued record is readable')
  t.equal(await log.find(2, 9), undefined, 'but not by another key')
  await new Promise((resolve) => setTimeout(resolve, 20))
  t.same(order, [], 'nobody goes on while the write is held')
  store.letGo()
  await Promise.all(waiting)
  t.same(order, [4, 5, 6], 'waiting calls go on in arrival order')
  await log.close()
  t.same(store.written.map((written) => written.id).sort(), [1, 2, 3, 4, 5, 6], 'every record written by close()')
  t.ok(store.inserts >= 3, 'in batches of at most batchSize')
})

t.test('an outage keeps the records queued and readable; close() writes them once the store is back', async (t) => {
  const store = new HeldStore()
  const reported: unknown[] = []
  const log = new CallLog(store.asKysely(), { ...options, queueMax: 100 }, Date.now, (error) => reported.push(error))
  store.failWith = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })
  log.append(row(1))
  log.append(row(2))
  await log.flush()
  t.equal(log.queued, 2, 'nothing is dropped during the outage')
  t.ok(reported.length >= 1, 'the outage is reported')
  t.match(await log.find(1, 1), { Response_Code: 200 })
  setTimeout(() => (store.failWith = null), 150)
  await log.close()
  t.same(store.written.map((written) => written.id), [1, 2])
})

t.test('a record the database refuses as it is is written narrowed, not dropped', async (t) => {
  const store = new HeldStore()
  const reported: unknown[] = []
  // A strict database: a value wider than its column is refused (MariaDB's "Data too long").
  const strict = store.asKysely()
  const kysely = {
    insertInto: (table: string) => ({
      values: (rows: LogRow | LogRow[]) => ({
        execute: async () => {
          const all = Array.isArray(rows) ? rows : [rows]
          if (all.some((one) => (one.http_host ?? '').length > 255 || (one.raw_request ?? '').length > 1000)) throw Object.assign(new Error("Data too long for column 'http_host'"), { code: 'ER_DATA_TOO_LONG' })
          return (strict.insertInto(table as 'api_log').values(rows as never) as unknown as { execute(): Promise<unknown> }).execute()
        },
      }),
    }),
  } as unknown as Kysely<CoreTables>
  const log = new CallLog(kysely, { ...options, queueMax: 100 }, Date.now, (error) => reported.push(error))
  log.append({ ...row(1), http_host: 'h'.repeat(400), raw_request: 'r'.repeat(5000) })
  log.append(row(2))
  await log.flush()
  await log.close()
  t.same(store.written.map((written) => written.id), [1, 2], 'both records are written')
  t.equal(store.written[0].http_host, 'h'.repeat(255))
  t.equal(store.written[0].raw_request, 'r'.repeat(1000))
  t.equal(reported.length, 1, 'the refusal is reported once')
})
