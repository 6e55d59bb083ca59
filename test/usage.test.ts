/**
 * POST /Api/Read/Usage (issue 18): calls per hour (24h) or per day (30d) and per status
 * of the caller's key, a key it created, or its whole tenant, summed from the call log,
 * with the rate-limit windows, tenant quota and credits now; json, xml and csv; bad
 * input is a 400, another creator's key the same 404 as an unknown one. SQLite and MariaDB.
 */
import t from 'tap'
import { XMLParser } from 'fast-xml-parser'
import Papa from 'papaparse'
import { forEachDatabase, startService } from './helpers/service.ts'
import { insertKey } from './helpers/keys.ts'

const hourMs = 3_600_000

t.test('usage counts the calls just made per bucket and status, for a key and for the tenant', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const groups = (await service.call('GET', '/Api/Read/Groups')).json as { Id: number }[]
    const created = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Usage key', GroupId: groups.map((g) => g.Id).join(','), Require_Https: 0, MaxHits: '100/1Hour' } })
    t.equal(created.status, 200, created.text)
    const key = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
    for (let i = 0; i < 3; i++) t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200)
    // A refused call with a valid signature is logged with its status (400: bad body).
    t.equal((await service.call('POST', '/Api/Read/Log', { key, body: { LogRequestId: 'x' } })).status, 400)

    const usage = await service.call('POST', '/Api/Read/Usage', { body: { KeyId: created.json.Id, Range: '24h' } })
    t.equal(usage.status, 200, usage.text)
    const answer = usage.json
    t.equal(answer.KeyId, created.json.Id)
    t.equal(answer.Step, '1Hour')
    t.equal(answer.Total, 4)
    const now = Date.now()
    const bucket = new Date(now - (now % hourMs)).toUTCString()
    t.same(answer.Calls, [{ Time: bucket, Status: 200, Count: 3 }, { Time: bucket, Status: 400, Count: 1 }])
    t.ok(Date.parse(answer.From) <= now - 23 * hourMs && Date.parse(answer.From) > now - 24 * hourMs, 'from: the start of the 24th hour back')
    const window = answer.Windows.find((row: { Window: string }) => row.Window === '1Hour')
    t.equal(window.Limit, 100)
    t.equal(window.Remain, 96, 'the key\'s own window, as it stands')
    // A window the key has not opened frees up a whole window after its first call: 60 s for 1Min, never 61.
    const idle = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Idle key', GroupId: String(groups[0].Id), Require_Https: 0, MaxHits: '5/1Min' } })
    const idleUsage = await service.call('POST', '/Api/Read/Usage', { body: { KeyId: idle.json.Id } })
    t.same(idleUsage.json.Windows, [{ Window: '1Min', Limit: 5, Remain: 5, ResetDate: idleUsage.json.Windows[0].ResetDate, TimeLeft: '60 Seconds' }])

    // The 30-day view sums per day.
    const days = await service.call('POST', '/Api/Read/Usage', { body: { KeyId: created.json.Id, Range: '30d' } })
    t.equal(days.json.Step, '1Day')
    t.same(days.json.Calls.map((row: { Count: number }) => row.Count), [3, 1])

    // The tenant: every key of it, the admin's own calls included.
    const tenant = await service.call('POST', '/Api/Read/Usage', { body: {} })
    t.equal(tenant.status, 200)
    t.equal(tenant.json.KeyId, null)
    t.equal(tenant.json.Range, '24h')
    t.ok(tenant.json.Total >= answer.Total + 3, 'the tenant counts the admin\'s calls too')

    // Another tenant's calls are not counted in this tenant.
    const other = await insertKey(service, { parent: 9, custno: 1 })
    await service.call('GET', '/Api/Read/Acl', { key: other })
    const otherUsage = await service.call('POST', '/Api/Read/Usage', { key: other, body: {} })
    t.equal(otherUsage.status, 200)
    t.equal(otherUsage.json.Total, 1, 'only its own call (the usage read itself is logged after it answers)')

    // Formats: xml with one Call element per row, csv with one row per bucket and status.
    const xml = await service.call('POST', '/Api/Read/Usage?format=xml', { body: { KeyId: created.json.Id } })
    t.equal(xml.status, 200)
    const parsed = new XMLParser().parse(xml.text)
    t.equal(parsed.Usage.Call.length, 2)
    t.equal(parsed.Usage.Total, 4)
    const csv = await service.call('POST', '/Api/Read/Usage?format=csv', { body: { KeyId: created.json.Id } })
    t.equal(csv.status, 200)
    const rows = Papa.parse(csv.text.trim(), { header: true }).data as Record<string, string>[]
    t.same(rows.map((row) => [row.Status, row.Count]), [['200', '3'], ['400', '1']])
    t.equal(csv.headers.get('x-total-count'), '4')
  }))

t.test('usage refuses bad input with 400 and keys it may not see with one 404', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const range = await service.call('POST', '/Api/Read/Usage', { body: { Range: '7d' } })
    t.equal(range.status, 400)
    t.match(range.text, /^Error: .*Range/)
    const extra = await service.call('POST', '/Api/Read/Usage', { body: { Key: 1 } })
    t.equal(extra.status, 400)
    t.match(extra.text, /^Error: /)
    const text = await service.call('POST', '/Api/Read/Usage', { body: { KeyId: 'one' } })
    t.equal(text.status, 400)

    // A key of the tenant made by someone else (not by the caller), and a key that does not exist.
    const sibling = await insertKey(service)
    const notMine = await service.call('POST', '/Api/Read/Usage', { body: { KeyId: sibling.id } })
    const missing = await service.call('POST', '/Api/Read/Usage', { body: { KeyId: 999_999 } })
    t.equal(notMine.status, 404)
    t.equal(missing.status, 404)
    t.equal(notMine.text, missing.text, 'the same text: nothing tells which')
    // The caller itself is always allowed.
    const own = await service.call('POST', '/Api/Read/Usage', { body: { KeyId: service.admin.id } })
    t.equal(own.status, 200)
  }))
