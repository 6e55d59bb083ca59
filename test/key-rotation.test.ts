/**
 * Issue 16 item 1: POST /Api/Rotate/Key. Both secrets sign during the overlap, the old
 * one fails from the second it ends (fake clock), a second rotation ends the first
 * overlap at once, and the call log says which secret signed. On SQLite and MariaDB.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'
import { groupNamed, keyTestGroups } from './helpers/keys.ts'
import type { SigningKey } from '../kernel/auth/signature.ts'
import { httpDate } from '../kernel/auth/apiDate.ts'
import { rotateMasterKey } from '../scripts/admin/masterKey.ts'

const signatureRefused = 'Error: Signature (x-apihmac) does not match.'

t.test('rotation with an overlap, a second rotation, and the log naming the secret', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // Near the real time, so x-apidate stays inside the window; calls sign with the fake time.
    const clock = { now: Math.floor(Date.now() / 1000) * 1000 }
    const service = await startService(t, { kind, clock: () => clock.now })
    const groups = await keyTestGroups(service)
    const logReader = await groupNamed(service, 'Call log reader')
    const created = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Rotated', GroupId: [groups.aclReader, logReader], Require_Https: 0, MaxHits: '100/1Min' }, today: true })
    t.equal(created.status, 200, created.text)
    const original: SigningKey = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
    const at = () => new Date(clock.now).toISOString()
    const read = (key: SigningKey) => service.call('GET', '/Api/Read/Acl', { key, date: at() })
    const rotate = (body: Record<string, unknown>) => service.call('POST', '/Api/Rotate/Key', { body, today: true, date: at() })

    const first = await rotate({ KeyId: created.json.Id, OldSecretValidFor: 60 })
    t.equal(first.status, 200, first.text)
    t.same(Object.keys(first.json), ['Id', 'Api_Key', 'Api_Secret', 'Name', 'MaxHits', 'OldSecretEnds'])
    t.match(first.json, { Id: created.json.Id, Api_Key: original.apiKey, Name: 'Rotated', MaxHits: '100/1Min', OldSecretEnds: httpDate(clock.now + 60_000) })
    t.not(first.json.Api_Secret, original.secret, 'a new secret')
    const second: SigningKey = { apiKey: original.apiKey, secret: first.json.Api_Secret }

    const byOld = await read(original)
    const byNew = await read(second)
    t.equal(byOld.status, 200, 'the old secret signs during the overlap')
    t.equal(byNew.status, 200, 'the new secret signs')
    const logOf = async (call: { headers: Headers }, key: SigningKey) => {
      const answer = await service.call('POST', '/Api/Read/Log', { key, body: { LogRequestId: Number(call.headers.get('x-requestid')) }, date: at() })
      t.equal(answer.status, 200, answer.text)
      return answer.json
    }
    t.equal((await logOf(byOld, second)).Secret, 'previous', 'the log names the old secret')
    t.equal((await logOf(byNew, second)).Secret, 'current', 'the log names the new secret')
    const xmlLog = await service.call('POST', '/Api/Read/Log?format=xml', { key: second, body: { LogRequestId: Number(byOld.headers.get('x-requestid')) }, date: at() })
    t.match(xmlLog.text, /<Secret>previous<\/Secret>/)

    clock.now += 59_000
    const lastSecond = at()
    t.equal((await read(original)).status, 200, 'still valid one second before the end')
    clock.now += 1_000
    // That very signature again: remembered as proven by the old secret, it ends with the overlap too.
    const reused = await service.call('GET', '/Api/Read/Acl', { key: original, date: lastSecond })
    t.equal(reused.text, signatureRefused, 'a reused signature of the old secret is refused at the end of the overlap')
    const late = await read(original)
    t.equal(late.status, 401, 'refused at the end of the overlap')
    t.equal(late.text, signatureRefused)
    t.match(late.headers.get('www-authenticate'), /^KeygateHMAC /)
    t.equal((await read(second)).status, 200)

    // A second rotation ends the first overlap at once, even with time left on it.
    const third = await rotate({ ApiKey: original.apiKey, OldSecretValidFor: 3600 })
    t.equal(third.status, 200, third.text)
    const thirdKey: SigningKey = { apiKey: original.apiKey, secret: third.json.Api_Secret }
    const fourth = await rotate({ KeyId: created.json.Id, OldSecretValidFor: 3600 })
    t.equal(fourth.status, 200, fourth.text)
    const fourthKey: SigningKey = { apiKey: original.apiKey, secret: fourth.json.Api_Secret }
    t.equal((await read(second)).text, signatureRefused, 'the secret two rotations back is refused')
    t.equal((await read(thirdKey)).status, 200, 'the previous secret signs')
    t.equal((await read(fourthKey)).status, 200, 'the current secret signs')

    // 0: the old secret stops now.
    const fifth = await rotate({ KeyId: created.json.Id, OldSecretValidFor: 0 })
    t.equal(fifth.status, 200, fifth.text)
    t.equal(fifth.json.OldSecretEnds, httpDate(clock.now))
    t.equal((await read(fourthKey)).text, signatureRefused, 'OldSecretValidFor 0 ends the old secret at once')
    t.equal((await read(thirdKey)).text, signatureRefused)
    t.equal((await read({ apiKey: original.apiKey, secret: fifth.json.Api_Secret })).status, 200)

    // A level-2 record of a rotation keeps OldSecretEnds (a date, no secret) and hides the new secret.
    const logged = await service.call('POST', '/Api/Rotate/Key', { body: { KeyId: created.json.Id, OldSecretValidFor: 30 }, today: true, date: at(), headers: { 'x-LogLevel': '2' } })
    t.equal(logged.status, 200, logged.text)
    const record = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: Number(logged.headers.get('x-requestid')) }, date: at() })
    t.equal(record.status, 200, record.text)
    t.match(record.json.Rsponse, { Api_Secret: '[redacted]', OldSecretEnds: httpDate(clock.now + 30_000) })
    t.same(JSON.parse(JSON.parse(record.json.Raw_Request).body), { KeyId: created.json.Id, OldSecretValidFor: 30 }, 'the request keeps OldSecretValidFor (a duration, no secret)')
  }),
)

t.test('the old secret stops at the very second OldSecretEnds shows, when rotated mid-second', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const whole = Math.floor(Date.now() / 1000) * 1000
    const clock = { now: whole + 400 }
    const service = await startService(t, { kind, clock: () => clock.now })
    const groups = await keyTestGroups(service)
    const created = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Mid-second', GroupId: groups.aclReader, Require_Https: 0 }, today: true })
    t.equal(created.status, 200, created.text)
    const original: SigningKey = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
    const at = () => new Date(clock.now).toISOString()
    const rotated = await service.call('POST', '/Api/Rotate/Key', { body: { KeyId: created.json.Id, OldSecretValidFor: 3 }, today: true, date: at() })
    t.equal(rotated.status, 200, rotated.text)
    // 3 s from x.400 ends within second x+3; the overlap is kept whole up to x+4, the date shown.
    t.equal(rotated.json.OldSecretEnds, httpDate(whole + 4000))
    clock.now = whole + 3999
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: original, date: at() })).status, 200, 'valid until the date shown')
    clock.now = whole + 4000
    const late = await service.call('GET', '/Api/Read/Acl', { key: original, date: at() })
    t.equal(late.status, 401, 'refused from the very second shown')
    t.equal(late.text, signatureRefused)
  }),
)

t.test('bad rotations are 4xx and change nothing', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const groups = await keyTestGroups(service)
    const created = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Kept', GroupId: groups.aclReader, Require_Https: 0 }, today: true })
    t.equal(created.status, 200, created.text)
    const key: SigningKey = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
    const cases: [string, Record<string, unknown>, number, string][] = [
      ['no OldSecretValidFor', { KeyId: created.json.Id }, 400, 'Error: OldSecretValidFor is required.'],
      ['neither KeyId nor ApiKey', { OldSecretValidFor: 10 }, 400, 'Error: KeyId or ApiKey is required.'],
      ['more than 30 days', { KeyId: created.json.Id, OldSecretValidFor: 30 * 86_400 + 1 }, 400, 'Error: OldSecretValidFor must be <= 2592000.'],
      ['negative', { KeyId: created.json.Id, OldSecretValidFor: -1 }, 400, 'Error: OldSecretValidFor must be >= 0.'],
      ['the caller itself', { KeyId: service.admin.id, OldSecretValidFor: 10 }, 404, 'Error: Key not found.'],
      ['an unknown key', { KeyId: 999_999, OldSecretValidFor: 10 }, 404, 'Error: Key not found.'],
    ]
    for (const [name, body, status, text] of cases) {
      const answer = await service.call('POST', '/Api/Rotate/Key', { body, today: true })
      t.equal(answer.status, status, name)
      t.equal(answer.text, text, name)
    }
    const noDayCode = await service.call('POST', '/Api/Rotate/Key', { body: { KeyId: created.json.Id, OldSecretValidFor: 10 } })
    t.equal(noDayCode.status, 401, 'the day code is required')
    t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200, 'the secret is unchanged')
    // A key without the Key rotation and audit group may not rotate.
    const child = await service.call('POST', '/Api/Rotate/Key', { key, body: { KeyId: created.json.Id, OldSecretValidFor: 10 }, today: true })
    t.equal(child.status, 403)
  }),
)

t.test('a master-key rotation re-seals the previous secret too', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const first = await startService(t, { kind })
    const groups = await keyTestGroups(first)
    const created = await first.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Overlapping', GroupId: groups.aclReader, Require_Https: 0 }, today: true })
    const rotated = await first.call('POST', '/Api/Rotate/Key', { body: { KeyId: created.json.Id, OldSecretValidFor: 3600 }, today: true })
    t.equal(rotated.status, 200, rotated.text)
    const result = await rotateMasterKey(first.kernel, { announce: () => {} })
    t.equal(result.Secrets, 2, 'both keys re-sealed')
    await first.stop()
    const service = await first.restart()
    const old: SigningKey = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
    const current: SigningKey = { apiKey: created.json.Api_Key, secret: rotated.json.Api_Secret }
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: current })).status, 200, 'the current secret opens under the new master key')
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: old })).status, 200, 'so does the previous one')
  }),
)
