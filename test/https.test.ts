import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { request } from 'node:https'
import { forEachDatabase, startService } from './helpers/service.ts'
import { probePlugin } from './helpers/probePlugin.ts'
import { insertKey } from './helpers/keys.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'

t.test('Require_Https over plain HTTP and behind a trusted proxy', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin], config: { trustProxy: ['127.0.0.1'] } })
    const httpsKey = await insertKey(service, { require_https: 1 })
    const refused = await service.call('GET', '/Probe/Echo', { key: httpsKey })
    t.equal(refused.status, 403)
    t.equal(refused.text, 'Error: HTTPS is required for this key or path.')
    t.equal((await service.call('GET', '/Probe/Echo', { key: httpsKey, headers: { 'x-forwarded-proto': 'https' } })).status, 200, 'the trusted proxy says https')
    t.equal((await service.call('GET', '/Probe/Echo', { key: httpsKey, headers: { 'x-forwarded-proto': 'http' } })).status, 403)
    t.equal((await service.call('GET', '/Probe/Echo', { key: httpsKey, headers: { 'x-forwarded-proto': 'https, http' } })).status, 403, 'the nearest proxy (last value) decides')
    // A proxy that writes only RFC 7239 Forwarded (docs/deploy.md: it "needs nothing more").
    const viaForwarded = (forwarded: string, more: Record<string, string> = {}) => service.call('GET', '/Probe/Echo', { key: httpsKey, headers: { forwarded, ...more } }).then((answer) => answer.status)
    t.equal(await viaForwarded('for=198.51.100.17;proto=https'), 200, 'Forwarded proto=https of the trusted proxy')
    t.equal(await viaForwarded('for=198.51.100.17;proto="HTTPS";by=_proxy'), 200, 'quoted, any case')
    t.equal(await viaForwarded('for=198.51.100.17;proto=http'), 403)
    t.equal(await viaForwarded('proto=https, for=198.51.100.17'), 403, "only the nearest proxy's element (the last) counts, not one its client sent")
    t.equal(await viaForwarded('for=198.51.100.17;proto=https', { 'x-forwarded-proto': 'http' }), 403, 'X-Forwarded-Proto, when sent, decides')

    await service.kernel.database.db.updateTable('api_acl').set({ require_https: 1 }).where('path', '=', '/Probe/Echo').execute()
    service.kernel.services.keys.accessChanged()
    const plainKey = await insertKey(service, { require_https: 0 })
    t.equal((await service.call('GET', '/Probe/Echo', { key: plainKey })).status, 403, "the entry's Require_Https applies to a key without it")
    t.equal((await service.call('GET', '/Probe/Deep/Level/Three', { key: plainKey })).status, 200, 'other entries are unaffected')
  }),
)

t.test('X-Forwarded-Proto from an untrusted peer is ignored', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })
    const httpsKey = await insertKey(service, { require_https: 1 })
    t.equal((await service.call('GET', '/Probe/Echo', { key: httpsKey, headers: { 'x-forwarded-proto': 'https' } })).status, 403)
    t.equal((await service.call('GET', '/Probe/Echo', { key: httpsKey, headers: { forwarded: 'for=198.51.100.17;proto=https' } })).status, 403, 'nor is its Forwarded proto=')
  }),
)

t.test('the service terminating TLS itself', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'keygate-tls-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  const certFile = join(folder, 'cert.pem')
  const keyFile = join(folder, 'key.pem')
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', '/CN=127.0.0.1'], { stdio: 'ignore' })
  const service = await startService(t, { kind: 'sqlite', plugins: [probePlugin], config: { tls: { certFile, keyFile } } })
  t.match(service.base, /^https:/)
  const httpsKey = await insertKey(service, { require_https: 1 })
  const status = await new Promise<number>((resolve, reject) => {
    request(`${service.base}/Probe/Echo`, { headers: signedHeaders(httpsKey, 'GET', '/Probe/Echo'), rejectUnauthorized: false }, (response) => {
      response.resume()
      resolve(response.statusCode!)
    }).on('error', reject).end()
  })
  t.equal(status, 200)
})
