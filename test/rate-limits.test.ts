/**
 * Rate limits (D7): the MaxHits grammar, 429 with Retry-After, the RateLimit fields,
 * and GET /Api/Read/Limits. The limiter is in memory, so these run on SQLite only;
 * the database plays no part in counting.
 */
import t from 'tap'
import { parseMaxHits, formatMaxHits, MaxHitsError } from '../kernel/limits/maxHits.ts'
import { MemoryWindowLimiter, RateLimits, inMemoryLimiters } from '../kernel/limits/rateLimits.ts'
import type { RateLimiterRes } from 'rate-limiter-flexible'
import type { CallerKey } from '../kernel/plugin.ts'
import { startService } from './helpers/service.ts'
import { insertKey } from './helpers/keys.ts'
import { timeLeftText } from '../plugins/log/index.ts'

t.test('MaxHits grammar', async (t) => {
  const accepted: [string | null | undefined, string][] = [
    [null, ''],
    [undefined, ''],
    ['', ''],
    ['   ', ''],
    ['10/1Sec', '10/1Sec'],
    ['10/1sec', '10/1Sec'],
    ['10/1SEC', '10/1Sec'],
    ['3/1Min', '3/1Min'],
    ['1000/1Hour', '1000/1Hour'],
    ['5/2Day', '5/2Day'],
    ['100000/1Mon', '100000/1Mon'],
    ['10/1Sec,1000/1Hour,100000/1Mon', '10/1Sec,1000/1Hour,100000/1Mon'],
    [' 1000 / 1 Hour , 10/1Sec ', '10/1Sec,1000/1Hour'],
    ['1/12Mon', '1/12Mon'],
  ]
  for (const [text, canonical] of accepted) {
    t.equal(formatMaxHits(parseMaxHits(text)), canonical, `accepts ${JSON.stringify(text)}`)
  }
  t.same(parseMaxHits('3/1Min'), [{ count: 3, seconds: 60, label: '1Min' }])
  t.same(parseMaxHits('1/1Mon')[0].seconds, 30 * 86_400, '1Mon is 30 days')

  const refused = [
    '10', '10/', '/1Sec', '10/Sec', '10/1', '10/1Week', '10/1Secs', '10 per second', '0/1Sec', '10/0Sec',
    '-1/1Sec', '1.5/1Sec', '10/1.5Sec', '10/1Sec,', ',10/1Sec', '10/1Sec,,1/1Hour', '10/1Sec;1/1Hour',
    '10/1Sec,20/1Sec', '10/60Sec,20/1Min', '1/13Mon', '10/1Sec 1/1Hour', 'abc',
  ]
  for (const text of refused) {
    let thrown: unknown
    try {
      parseMaxHits(text)
    } catch (error) {
      thrown = error
    }
    t.ok(thrown instanceof MaxHitsError, `refuses ${JSON.stringify(text)}`)
  }
})

t.test('a MaxHits error quotes the item as typed', async (t) => {
  t.throws(() => parseMaxHits('10/1Sec 5/1Min'), { message: "MaxHits item '10/1Sec 5/1Min' is not of the form <count>/<n><Sec|Min|Hour|Day|Mon>, e.g. 10/1Sec,1000/1Hour" }, 'a missing comma stays visible')
  t.throws(() => parseMaxHits('10/1Sec, 0 / 1 Min'), { message: "MaxHits item '0 / 1 Min' needs a count and a window of at least 1" })
  t.throws(() => parseMaxHits('9007199254740991/1Sec'), { message: "MaxHits item '9007199254740991/1Sec' has a count over 999999999999" }, 'of the form, but too large: said so')
  t.throws(() => parseMaxHits('1/99999999999999999999Sec'), { message: "MaxHits item '1/99999999999999999999Sec' has a window longer than a year" })
  t.same(parseMaxHits('999999999999/1Mon'), [{ count: 999999999999, seconds: 2_592_000, label: '1Mon' }])
})

t.test('TimeLeft text', async (t) => {
  t.equal(timeLeftText(0), '0 Seconds')
  t.equal(timeLeftText(1000), '1 Second')
  t.equal(timeLeftText(41_200), '42 Seconds')
  t.equal(timeLeftText(119_000), '119 Seconds')
  t.equal(timeLeftText(300_000), '5 Minutes')
  t.equal(timeLeftText(3 * 3_600_000), '3 Hours')
  t.equal(timeLeftText(12 * 86_400_000), '12 Days')
})

t.test('a refused call is given back to the windows that had room', async (t) => {
  const limits = new RateLimits()
  const caller = { id: 7, rateWindows: parseMaxHits('2/1Min,100/1Hour') } as unknown as CallerKey
  t.equal((await limits.consume(caller))!.allowed, true)
  t.equal((await limits.consume(caller))!.allowed, true)
  const third = await limits.consume(caller)
  t.equal(third!.allowed, false)
  t.equal(third!.window.label, '1Min')
  const status = await limits.status(caller)
  t.equal(status[0].remaining, 0)
  t.equal(status[1].remaining, 98, 'the hour counts only the two calls that went through')
})

t.test('the 4th call of 3/1Min is 429 with Retry-After; RateLimit fields on every answer', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const key = await insertKey(service, { max_hits: '3/1Min' })
  for (let call = 1; call <= 3; call++) {
    const answer = await service.call('GET', '/Api/Read/Acl', { key })
    t.equal(answer.status, 200, `call ${call} passes`)
    t.equal(answer.headers.get('ratelimit-policy'), '"1Min";q=3;w=60')
    t.match(answer.headers.get('ratelimit'), new RegExp(`^"1Min";r=${3 - call};t=(60|59|58)$`))
  }
  const fourth = await service.call('GET', '/Api/Read/Acl', { key })
  t.equal(fourth.status, 429)
  t.equal(fourth.text, 'Error: Rate limit exceeded (3/1Min)')
  t.match(fourth.headers.get('content-type'), /^text\/plain/)
  const retryAfter = Number(fourth.headers.get('retry-after'))
  t.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter} is within the minute`)
  t.match(fourth.headers.get('ratelimit'), /^"1Min";r=0;t=\d+$/)
  t.match(fourth.headers.get('x-requestid'), /^\d+$/, 'a 429 still has its request id (and its log record)')

  // A call the ACL refuses still counts, and still carries the fields.
  const bare = await insertKey(service, { max_hits: '5/1Min' }, [])
  const forbidden = await service.call('GET', '/Api/Read/Acl', { key: bare })
  t.equal(forbidden.status, 403)
  t.equal(forbidden.headers.get('ratelimit'), '"1Min";r=4;t=60')

  // A key without MaxHits carries none.
  const open = await service.call('GET', '/Api/Read/Acl')
  t.equal(open.status, 200)
  t.equal(open.headers.get('ratelimit'), null)
  t.equal(open.headers.get('ratelimit-policy'), null)
})

t.test('two windows with as few calls left: the RateLimit fields name the one that resets later', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const key = await insertKey(service, { max_hits: '3/1Min,3/1Hour' })
  const answer = await service.call('GET', '/Api/Read/Acl', { key })
  t.equal(answer.status, 200)
  t.equal(answer.headers.get('ratelimit-policy'), '"1Hour";q=3;w=3600', 'a client that waits for 1Min would be refused for the hour')
  t.match(answer.headers.get('ratelimit'), /^"1Hour";r=2;t=(3600|3599)$/)
})

t.test('a fresh window allows again', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const key = await insertKey(service, { max_hits: '3/2Sec' })
  const statuses = []
  for (let call = 0; call < 4; call++) statuses.push((await service.call('GET', '/Api/Read/Acl', { key })).status)
  t.same(statuses, [200, 200, 200, 429])
  const refused = await service.call('GET', '/Api/Read/Acl', { key })
  await new Promise((resolve) => setTimeout(resolve, Number(refused.headers.get('retry-after')) * 1000 + 100))
  const fresh = []
  for (let call = 0; call < 4; call++) fresh.push((await service.call('GET', '/Api/Read/Acl', { key })).status)
  t.same(fresh, [200, 200, 200, 429], 'the next window has its full count again')
})

t.test('GET /Api/Read/Limits', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const none = await service.call('GET', '/Api/Read/Limits')
  t.equal(none.status, 200)
  t.same(none.json, {}, 'a key without MaxHits has no windows')

  const key = await insertKey(service, { max_hits: '10/1Sec,1000/1Hour,100000/1Mon' })
  await service.call('GET', '/Api/Read/Acl', { key })
  const before = Date.now()
  const limits = await service.call('GET', '/Api/Read/Limits', { key })
  t.equal(limits.status, 200)
  t.same(Object.keys(limits.json), ['1Sec', '1Hour', '1Mon'])
  for (const window of Object.values(limits.json) as Record<string, unknown>[]) {
    t.same(Object.keys(window), ['Limit', 'Remain', 'ResetDate', 'TimeLeft'])
    t.match(window.ResetDate, /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/)
    t.match(window.TimeLeft, /^\d+ (Second|Minute|Hour|Day)s?$/)
  }
  t.match(limits.json['1Hour'], { Limit: 1000, Remain: 998, TimeLeft: /^(59|60) Minutes$/ }, 'the limits read counts itself')
  t.match(limits.json['1Mon'], { Limit: 100000, Remain: 99998, TimeLeft: '30 Days' })
  const hourReset = Date.parse(limits.json['1Hour'].ResetDate)
  t.ok(hourReset > before + 3_500_000 && hourReset <= before + 3_601_000, 'the hour resets about an hour after its first call')

  // XML and CSV: one item per window, its label in Window (a label is no element name).
  const xml = await service.call('GET', '/Api/Read/Limits?format=xml', { key })
  t.equal(xml.status, 200)
  t.match(xml.text, /<Limits>\s*<Window>\s*<Window>1Sec<\/Window>\s*<Limit>10<\/Limit>\s*<Remain>\d+<\/Remain>/)
  t.equal(xml.text.match(/<Window>\s*<Window>/g)?.length, 3)
  const csv = await service.call('GET', '/Api/Read/Limits?format=csv', { key })
  t.equal(csv.status, 200)
  const lines = csv.text.split('\r\n')
  t.equal(lines[0], 'Window,Limit,Remain,ResetDate,TimeLeft')
  t.same(lines.slice(1).map((line) => line.split(',')[0]), ['1Sec', '1Hour', '1Mon'])
})

t.test('in-memory windows follow the clock, including windows longer than a timer can hold', async (t) => {
  let now = Date.UTC(2026, 0, 1)
  const limits = new RateLimits(inMemoryLimiters(() => now))
  const caller = { id: 1, rateWindows: parseMaxHits('3/1Min,5/1Mon') } as unknown as CallerKey
  const allowed = async () => (await limits.consume(caller))!.allowed
  t.same([await allowed(), await allowed(), await allowed(), await allowed()], [true, true, true, false], '4th of 3/1Min refused')
  now += 60_000
  t.equal(await allowed(), true, 'a fresh minute allows again')
  t.equal(await allowed(), true)
  const monthSpent = await limits.consume(caller)
  t.match(monthSpent, { allowed: false, window: { label: '1Mon' } }, 'the month (5) is spent after 5 calls that went through')
  now += 25 * 86_400_000
  t.equal(await allowed(), false, 'the month still counts after 25 days (past the 24.8-day timer limit)')
  now += 5 * 86_400_000
  t.equal(await allowed(), true, 'and resets after 30 days')
  const [minute, month] = await limits.status(caller, now)
  t.match(minute, { remaining: 2, resetAt: now + 60_000 })
  t.match(month, { remaining: 4, resetAt: now + 30 * 86_400_000 })
})

t.test('a point given back after its window ended reaches no later window (in memory, as the WORKERS primary counts)', async (t) => {
  let now = Date.UTC(2026, 0, 1)
  const limiter = new MemoryWindowLimiter(3, 60_000, () => now)
  const outcome = (key: number) => limiter.consume(key).then(() => true, () => false)
  const spend = async (key: number) => {
    t.same([await outcome(key), await outcome(key), await outcome(key)], [true, true, true])
    const fourth = await limiter.consume(key).then(() => null, (refused: RateLimiterRes) => refused)
    t.ok(fourth, 'the fourth is refused')
    return fourth!
  }
  const refused = await spend(1)
  now += 60_000
  t.equal(await outcome(1), true, 'another call opens the next window')
  await limiter.giveBack(1, refused)
  t.match(await limiter.get(1), { consumedPoints: 1 }, 'that window keeps its call: the point was not taken there')
  t.same([await outcome(1), await outcome(1), await outcome(1)], [true, true, false], 'three answered in it in all')

  const late = await spend(2)
  now += 60_000
  await limiter.giveBack(2, late)
  t.equal(await limiter.get(2), null, 'a late give-back opens no window')

  const timely = await spend(3)
  for (let again = 0; again < 5; again++) await limiter.giveBack(3, timely)
  t.match(await limiter.get(3), { consumedPoints: 0, msBeforeNext: 60_000 }, 'within its window: given back, never below zero')
})

t.test('the RateLimit fields name the window as the caller wrote it, though 7/60Sec and 7/1Min count alike', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const seconds = await insertKey(service, { max_hits: '7/60Sec' })
  const minute = await insertKey(service, { max_hits: '7/1Min,100/1Hour' })
  for (const [key, label] of [[seconds, '60Sec'], [minute, '1Min'], [seconds, '60Sec']] as const) {
    const answer = await service.call('GET', '/Api/Read/Limits', { key })
    t.same(Object.keys(answer.json)[0], label)
    t.equal(answer.headers.get('ratelimit-policy'), `"${label}";q=7;w=60`, `${label}: its own name, whichever key counted first`)
    t.match(answer.headers.get('ratelimit'), new RegExp(`^"${label}";r=\\d;t=\\d+$`))
  }
  // The limits read was one of its seven.
  for (let call = 0; call < 6; call++) await service.call('GET', '/Api/Read/Acl', { key: minute })
  const refused = await service.call('GET', '/Api/Read/Acl', { key: minute })
  t.equal(refused.status, 429)
  t.equal(refused.text, 'Error: Rate limit exceeded (7/1Min)')
  t.match(refused.headers.get('ratelimit'), /^"1Min";r=0;t=\d+$/, 'a refusal with two windows (given back) names it so too')
})
