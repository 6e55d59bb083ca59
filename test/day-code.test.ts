import t from 'tap'
import { dayCodeAt, verifyDayCode, hotp, base32, dayCodeUri } from '../kernel/auth/dayCode.ts'
import { forEachDatabase, startService } from './helpers/service.ts'
import { probePlugin } from './helpers/probePlugin.ts'
import { insertKey } from './helpers/keys.ts'

// RFC 6238 appendix B, SHA-1 column: the algorithm with a 30 s step.
const rfcSecret = Buffer.from('12345678901234567890')
const rfcVectors: [number, string][] = [
  [59, '94287082'],
  [1111111109, '07081804'],
  [1111111111, '14050471'],
  [1234567890, '89005924'],
  [2000000000, '69279037'],
  [20000000000, '65353130'],
]

t.test('RFC 6238 test vectors (30 s step)', async (t) => {
  const rfcStep = { stepSeconds: 30, digits: 8, drift: 1 }
  for (const [seconds, code] of rfcVectors) {
    t.equal(dayCodeAt(rfcSecret, seconds * 1000, rfcStep), code, `T=${seconds}`)
    t.ok(verifyDayCode(rfcSecret, code, seconds * 1000, rfcStep))
  }
  t.equal(hotp(rfcSecret, 0, 6), '755224', 'RFC 4226 HOTP count 0')
})

t.test('four-hour step with one step of drift either way', async (t) => {
  const step = 14_400_000
  const now = 1_800_000_000_000
  const current = dayCodeAt(rfcSecret, now)
  t.ok(verifyDayCode(rfcSecret, dayCodeAt(rfcSecret, now - step), now), 'previous step accepted')
  t.ok(verifyDayCode(rfcSecret, dayCodeAt(rfcSecret, now + step), now), 'next step accepted')
  t.notOk(verifyDayCode(rfcSecret, dayCodeAt(rfcSecret, now - 2 * step), now), 'two steps back refused')
  t.notOk(verifyDayCode(rfcSecret, dayCodeAt(rfcSecret, now + 2 * step), now), 'two steps ahead refused')
  t.notOk(verifyDayCode(rfcSecret, current.slice(0, 7), now), 'short code refused')
  t.notOk(verifyDayCode(rfcSecret, `${current}0`, now), 'long code refused')
  t.notOk(verifyDayCode(rfcSecret, 'abcdefgh', now), 'non-digits refused')
  t.equal(base32(Buffer.from('foobar')), 'MZXW6YTBOI', 'RFC 4648 base32')
  t.match(dayCodeUri(rfcSecret, 'keygate'), /^otpauth:\/\/totp\/.+\?secret=[A-Z2-7]+&issuer=keygate&algorithm=SHA1&digits=8&period=14400$/)
})

t.test('day code on the wire', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })
    t.equal((await service.call('POST', '/Probe/Today')).status, 401, 'a dayCode route without x-apitoday')
    const wrong = await service.call('POST', '/Probe/Today', { today: '00000000' })
    t.equal(wrong.status, 401)
    t.equal(wrong.text, 'Error: The day code (x-apitoday) is wrong or expired.')
    t.equal((await service.call('POST', '/Probe/Today', { today: true })).status, 200)
    t.equal((await service.call('POST', '/Probe/Today', { today: service.today(Date.now() - 14_400_000) })).status, 200, 'one step old')
    t.equal((await service.call('GET', '/Probe/Echo')).status, 200, 'other routes need no day code for a DayPass 0 key')

    const dayPassKey = await insertKey(service, { day_pass: 1 })
    t.equal((await service.call('GET', '/Probe/Echo', { key: dayPassKey })).status, 401, 'DayPass 1 key needs the code everywhere')
    t.equal((await service.call('GET', '/Probe/Echo', { key: dayPassKey, today: true })).status, 200)

    const guesser = await insertKey(service)
    let lastStatus = 0
    for (let attempt = 0; attempt < 11; attempt++) lastStatus = (await service.call('POST', '/Probe/Today', { key: guesser, today: String(10_000_000 + attempt) })).status
    t.equal(lastStatus, 429, 'the 11th wrong code in a minute is refused outright')
    const afterBlock = await service.call('POST', '/Probe/Today', { key: guesser, today: true })
    t.equal(afterBlock.status, 429, 'even the right code waits until the block ends')
    t.ok(Number(afterBlock.headers.get('retry-after')) > 0)
  }),
)
