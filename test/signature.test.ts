import t from 'tap'
import { createHmac } from 'node:crypto'
import { forEachDatabase, startService } from './helpers/service.ts'
import { probePlugin } from './helpers/probePlugin.ts'
import { insertKey } from './helpers/keys.ts'
import { sign, stringToSign, signedHeaders, type HashMethod } from '../kernel/auth/signature.ts'

t.test('the worked example of the README', async (t) => {
  const toSign = stringToSign('GET', '/Api/Read/Acl', 'Sun, 22 Nov 2026 08:49:37 GMT', '')
  t.equal(toSign, 'GET\n/Api/Read/Acl\nSun, 22 Nov 2026 08:49:37 GMT\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855')
  t.equal(sign('example-secret', 'GET', '/Api/Read/Acl', 'Sun, 22 Nov 2026 08:49:37 GMT'), createHmac('sha256', 'example-secret').update(toSign).digest('hex'))
})

t.test('signatures on the wire', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })
    const body = { Name: 'x' }

    await t.test('good, bad, truncated, tampered', async (t) => {
      t.equal((await service.call('POST', '/Probe/Body', { body })).status, 200)
      const headers = signedHeaders(service.admin, 'POST', '/Probe/Body', JSON.stringify(body))
      const send = (changes: Record<string, string>, sent = JSON.stringify(body), path = '/Probe/Body', method = 'POST') =>
        fetch(service.base + path, { method, headers: { ...headers, 'content-type': 'application/json', ...changes }, body: method === 'GET' ? undefined : sent })
      const truncated = await send({ 'x-apihmac': headers['x-apihmac'].slice(0, 40) })
      t.equal(truncated.status, 401, 'truncated signature')
      t.equal(await truncated.text(), 'Error: Signature (x-apihmac) does not match.')
      t.equal((await send({ 'x-apihmac': headers['x-apihmac'].replace(/^./, (c) => (c === '0' ? '1' : '0')) })).status, 401, 'one digit changed')
      t.equal((await send({ 'x-apihmac': 'zz' + headers['x-apihmac'].slice(2) })).status, 401, 'not hex')
      t.equal((await send({}, JSON.stringify({ Name: 'y' }))).status, 401, 'other body, same signature')
      t.equal((await send({}, JSON.stringify(body), '/Probe/Body?extra=1')).status, 401, 'query added')
      t.equal((await send({ 'x-apidate': new Date(Date.now() + 1000).toUTCString() })).status, 401, 'other date')
      t.equal((await send({ 'x-apikey': (await insertKey(service)).apiKey })).status, 401, 'another key with this signature')
      t.equal((await send({ 'x-apihmac': sign('not-the-secret', 'POST', '/Probe/Body', headers['x-apidate'], JSON.stringify(body)) })).status, 401, 'wrong secret')
    })

    await t.test('a signature of the right length that is not ASCII is a mismatch, not a 500', async (t) => {
      // The same call twice: the second meets the key's last verified signature (the
      // one-per-second reuse path), where a latin1 character once made a RangeError.
      const headers = signedHeaders(service.admin, 'GET', '/Probe/Echo')
      t.equal((await fetch(service.base + '/Probe/Echo', { headers })).status, 200)
      const forged = await fetch(service.base + '/Probe/Echo', { headers: { ...headers, 'x-apihmac': '\u00e9' + headers['x-apihmac'].slice(1) } })
      t.equal(forged.status, 401)
      t.equal(await forged.text(), 'Error: Signature (x-apihmac) does not match.')
      t.equal((await fetch(service.base + '/Probe/Echo', { headers })).status, 200, 'the real signature still works')
    })

    await t.test('lower-case paths are signed as sent', async (t) => {
      const path = '/api/read/acl'
      const answer = await service.call('GET', path)
      t.equal(answer.status, 200)
      const headers = signedHeaders(service.admin, 'GET', '/Api/Read/Acl')
      t.equal((await fetch(service.base + path, { headers })).status, 401, 'a signature over another spelling does not fit')
    })

    await t.test('each Require_Hash method, and the key override', async (t) => {
      const db = service.kernel.database.db
      const methods: HashMethod[] = [1, 2, 3, 4, 5]
      for (const method of methods) {
        await db.updateTable('api_acl').set({ require_hash: method }).where('path', '=', '/Probe/Echo').execute()
        service.kernel.services.keys.accessChanged()
        const key = await insertKey(service)
        for (const used of methods) {
          const status = (await service.call('GET', '/Probe/Echo', { key, hashMethod: used })).status
          t.equal(status, used === method ? 200 : 401, `entry requires ${method}, client used ${used}`)
        }
        const overridden = await insertKey(service, { require_hash: 5 })
        t.equal((await service.call('GET', '/Probe/Echo', { key: overridden, hashMethod: 5 })).status, 200, 'key override wins')
        if (method !== 5) t.equal((await service.call('GET', '/Probe/Echo', { key: overridden, hashMethod: method })).status, 401, 'entry method refused under override')
      }
      await db.updateTable('api_acl').set({ require_hash: 0 }).where('path', '=', '/Probe/Echo').execute()
      service.kernel.services.keys.accessChanged()
      const anyMethod = await insertKey(service)
      for (const used of methods) t.equal((await service.call('GET', '/Probe/Echo', { key: anyMethod, hashMethod: used })).status, 200, `Require_Hash 0 accepts method ${used}`)
    })
  }),
)
