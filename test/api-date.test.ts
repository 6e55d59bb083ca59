import t from 'tap'
import { parseApiDate, dateWithinWindow } from '../kernel/auth/apiDate.ts'
import { forEachDatabase, startService } from './helpers/service.ts'
import { probePlugin } from './helpers/probePlugin.ts'
import { insertKey } from './helpers/keys.ts'

t.test('x-apidate formats (D3)', async (t) => {
  t.equal(parseApiDate('Sun, 22 Nov 2026 08:49:37 GMT'), Date.UTC(2026, 10, 22, 8, 49, 37))
  t.equal(parseApiDate('2026-11-22T08:49:37Z'), Date.UTC(2026, 10, 22, 8, 49, 37))
  t.equal(parseApiDate('2026-11-22T08:49:37.250Z'), Date.UTC(2026, 10, 22, 8, 49, 37, 250))
  t.equal(parseApiDate('2026-11-22T08:49:37+00:00'), Date.UTC(2026, 10, 22, 8, 49, 37), 'RFC 3339 UTC as +00:00')
  t.equal(parseApiDate('2026-11-22T08:49:37.5-00:00'), Date.UTC(2026, 10, 22, 8, 49, 37, 500), 'and as -00:00')
  for (const bad of ['', 'yesterday', 'Mon, 22 Nov 2026 08:49:37 GMT', 'Sun, 22 Nov 2026 08:49:37 UTC', '2026-11-22T08:49:37+01:00',
    '2026-11-22 08:49:37', 'Sun, 31 Feb 2026 08:49:37 GMT', '2026-02-30T00:00:00Z', '2026-11-22T24:00:00Z', '1763801377', 'Sunday, 22-Nov-26 08:49:37 GMT']) {
    t.equal(parseApiDate(bad), null, `refused: '${bad}'`)
  }
  const yearOne = new Date(0)
  yearOne.setUTCFullYear(1, 0, 1)
  t.equal(parseApiDate('0001-01-01T00:00:00Z'), yearOne.getTime(), 'the years 0-99 are years, not 1900-1999')
  t.equal(parseApiDate('Mon, 01 Jan 0001 00:00:00 GMT'), yearOne.getTime())
  t.equal(parseApiDate('0099-02-29T00:00:00Z'), null, '0099 is no leap year')
  const now = Date.UTC(2026, 10, 22, 12)
  t.ok(dateWithinWindow(now - 5 * 60_000, now, null), 'default window: 5 minutes, inclusive')
  t.notOk(dateWithinWindow(now - 5 * 60_000 - 1000, now, null))
  t.ok(dateWithinWindow(now - 1000 * 3600 * 1000, now, 0), 'AllowHours 0 skips the check')
  t.ok(dateWithinWindow(now + 30 * 60_000, now, 0.5), 'fractional hours')
  t.notOk(dateWithinWindow(now + 31 * 60_000, now, 0.5))
})

t.test('x-apidate on the wire', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })
    const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toUTCString()
    t.equal((await service.call('GET', '/Probe/Echo', { date: at(-60_000) })).status, 200, 'a minute old')
    const stale = await service.call('GET', '/Probe/Echo', { date: at(-10 * 60_000) })
    t.equal(stale.status, 401, 'ten minutes old')
    t.equal(stale.text, 'Error: x-apidate is outside the allowed clock window.')
    t.equal((await service.call('GET', '/Probe/Echo', { date: at(10 * 60_000) })).status, 401, 'ten minutes ahead')
    t.equal((await service.call('GET', '/Probe/Echo', { date: new Date().toISOString().replace(/\.\d+Z$/, 'Z') })).status, 200, 'RFC 3339')
    const garbage = await service.call('GET', '/Probe/Echo', { date: 'tomorrow' })
    t.equal(garbage.status, 401)
    t.match(garbage.text, /^Error: x-apidate must be an HTTP-date/)

    const lenient = await insertKey(service, { allow_hours: 0 })
    t.equal((await service.call('GET', '/Probe/Echo', { key: lenient, date: 'Sun, 02 Jan 2000 00:00:00 GMT' })).status, 200, 'AllowHours 0: any date (still signed)')
    t.equal((await service.call('GET', '/Probe/Echo', { key: lenient, date: 'whenever' })).status, 401, 'AllowHours 0: still a date')
    const halfHour = await insertKey(service, { allow_hours: 0.5 })
    t.equal((await service.call('GET', '/Probe/Echo', { key: halfHour, date: at(-25 * 60_000) })).status, 200, 'AllowHours 0.5: 25 minutes')
    t.equal((await service.call('GET', '/Probe/Echo', { key: halfHour, date: at(-35 * 60_000) })).status, 401, 'AllowHours 0.5: 35 minutes')
    const twoHours = await insertKey(service, { allow_hours: 2 })
    t.equal((await service.call('GET', '/Probe/Echo', { key: twoHours, date: at(-90 * 60_000) })).status, 200, 'AllowHours 2: 90 minutes')
  }),
)
