import t from 'tap'
import { compileAclPath, aclPathProblem } from '../kernel/auth/aclPath.ts'
import { forEachDatabase, startService } from './helpers/service.ts'
import { probePlugin } from './helpers/probePlugin.ts'
import { insertKey } from './helpers/keys.ts'
import { createGroup } from '../kernel/boot/bootstrap.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'
import { request } from 'node:http'

function exactPathStatus(port: number, path: string, headers: Record<string, string>, target = `/v1.0${path}`): Promise<number> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: target, headers }, (response) => {
      response.resume()
      resolve(response.statusCode!)
    }).on('error', reject).end()
  })
}

t.test('ACL path matching', async (t) => {
  const cases: [string, string, boolean][] = [
    ['/Api/Read/Acl', '/Api/Read/Acl', true],
    ['/Api/Read/Acl', '/api/read/acl', true],
    ['/Api/Read/Acl', '/Api/Read/Log', false],
    ['/Api/Read/*', '/Api/Read/Acl', true],
    ['/Api/Read/*', '/Api/Read/Acl/Deeper/Still', true],
    ['/Api/Read/*', '/Api/Read', false],
    ['/Api/Read/*', '/Api/ReadX/Acl', false],
    ['/Api/*', '/Api/Create/Key', true],
    ['/*', '/People/Read/Missing', true],
  ]
  for (const [path, route, expected] of cases) t.equal(compileAclPath(path)(route), expected, `${path} covers ${route}: ${expected}`)
  t.equal(aclPathProblem('/Api/*/Acl'), '* is allowed only as the last segment')
  t.equal(aclPathProblem('Api/Read'), 'an ACL path starts with /')
  t.match(aclPathProblem('/Api/../Create'), /not allowed/)
  t.equal(aclPathProblem('/Api/Read/*'), null)
})

t.test('ACL on the wire', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })
    const db = service.kernel.database.db

    await t.test('wildcard depth', async (t) => {
      t.equal((await service.call('GET', '/Probe/Deep/Level/Three')).status, 200, '/Probe/Deep/* covers three levels down')
      const shallow = await service.call('GET', '/Probe/Deep')
      t.equal(shallow.status, 403, '/Probe/Deep/* does not cover /Probe/Deep itself')
      t.equal(shallow.text, 'Error: Your ACL does not allow /Probe/Deep.')
      t.match(shallow.headers.get('x-requestid'), /^\d+$/, 'a refused but authenticated call has a request id')
      t.equal((await service.call('GET', '/Probe/Unlisted')).status, 403, 'a route no entry covers')
    })

    await t.test('case and encoding tricks neither bypass nor trip the ACL', async (t) => {
      t.equal((await service.call('GET', '/PROBE/ECHO')).status, 200, 'upper case reaches the route and its ACL entry')
      t.equal((await service.call('GET', '/probe/deep/level/three')).status, 200)
      // Sent with node:http, which (unlike fetch) sends the path exactly as written.
      for (const path of ['/Probe%2FEcho', '/Probe//Echo', '//Probe/Echo', '/Probe/Deep/../Echo', '/Probe/Echo/', '/Probe/./Echo', '/Probe/Deep/Level/Three/..']) {
        t.equal(await exactPathStatus(service.port, path, signedHeaders(service.admin, 'GET', path)), 404, `${path} is no route`)
      }
      t.equal((await service.call('GET', '/Probe/Unlisted%2F..%2FEcho')).status, 404, 'encoded traversal is no route')
      t.equal((await service.call('GET', '/Probe/%55nlisted')).status, 403, 'an encoded letter reaches /Probe/Unlisted and its ACL decision')
      const signed = signedHeaders(service.admin, 'GET', '/Probe/Echo')
      t.equal(await exactPathStatus(service.port, '/Probe/Echo', signed, '/V1.0/Probe/Echo'), 200, 'the base path in another case')
      t.equal(await exactPathStatus(service.port, '/Probe/Echo', signed, '/v1%2E0/Probe/Echo'), 404, 'a base path spelt with %-escapes is no route (its signed path would be cut mid-escape)')
      t.equal(await exactPathStatus(service.port, '/Probe/Echo#x', signedHeaders(service.admin, 'GET', '/Probe/Echo#x')), 400, 'a fragment is never sent: 400')
    })

    await t.test('a key only reaches what its groups allow', async (t) => {
      const group = await createGroup(db, { name: 'echo only', paths: [{ path: '/Probe/Echo', displayName: 'echo' }] })
      const narrow = await insertKey(service, {}, [group])
      t.equal((await service.call('GET', '/Probe/Echo', { key: narrow })).status, 200)
      t.equal((await service.call('GET', '/Probe/Deep/Level/Three', { key: narrow })).status, 403)
      t.equal((await service.call('GET', '/Api/Read/Acl', { key: narrow })).status, 403)
    })

    await t.test('Is_Public entries need no credentials', async (t) => {
      const open = await fetch(`${service.base}/Probe/Public`)
      t.equal(open.status, 200)
      t.same(await open.json(), { Anonymous: true })
      t.match(open.headers.get('x-requestid'), /^\d+$/)
      t.equal((await fetch(`${service.base}/Probe/Echo`)).status, 401, 'a non-public route needs credentials')
      t.same((await service.call('GET', '/Probe/Public')).json, { Anonymous: false }, 'a key may call a public path as itself')
    })

    await t.test('an unknown route is 404 before any authentication', async (t) => {
      const answer = await fetch(`${service.base}/Nothing/Here`)
      t.equal(answer.status, 404)
      t.equal(await answer.text(), 'Error: Not found.')
      t.equal((await fetch(`${service.base}/Probe/Echo`, { method: 'DELETE' })).status, 404, 'a method with no route')
    })
  }),
)

t.test("a disabled plugin's paths do not exist, even when the ACL allows them", (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin], config: { plugins: ['acl'] } })
    const acl = await service.call('GET', '/Api/Read/Acl')
    t.equal(acl.status, 200)
    await service.kernel.database.db.insertInto('api_acl').values({ path: '/*', display_name: 'everything', is_public: 0, require_https: 0, require_hash: 0 }).execute()
    const answer = await fetch(`${service.base}/Api/Create/Key`, { method: 'POST', headers: signedHeaders(service.admin, 'POST', '/Api/Create/Key') })
    t.equal(answer.status, 404, 'the keys plugin is not enabled')
    t.equal((await service.call('GET', '/People/Read/Missing')).status, 404, 'the people plugin is not enabled')
  }),
)
