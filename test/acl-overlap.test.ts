/**
 * Issue 12, item 3: overlapping ACL entries. Of all entries that cover a path, the
 * strictest rule wins (Require_Https if any requires it, the strongest Require_Hash any
 * names), the key's own Require_Hash still overriding; the call log's Api_Acl is the
 * lowest matching id; GET /Api/Read/Acl lists the entries as stored. SQLite and MariaDB.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'
import { probePlugin } from './helpers/probePlugin.ts'
import { groupNamed, insertKey } from './helpers/keys.ts'
import { createGroup } from '../kernel/boot/bootstrap.ts'

t.test('overlapping entries: the strictest rule of all matching entries governs', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin], config: { trustProxy: ['127.0.0.1'] } })
    const db = service.kernel.database.db
    // Made first, so the weaker entries have the lower ids: the old "lowest id wins" picked them.
    const weak = await createGroup(db, {
      name: 'Weak',
      paths: [
        { path: '/Probe/Echo', displayName: 'echo with md5', requireHash: 1 },
        { path: '/Probe/Deep/Level/Three', displayName: 'deep over http', requireHttps: 0 },
      ],
    })
    const strict = await createGroup(db, {
      name: 'Strict',
      paths: [
        { path: '/Probe/*', displayName: 'all probes with sha256', requireHash: 3 },
        { path: '/Probe/Deep/*', displayName: 'deep over https only', requireHttps: 1 },
      ],
    })
    const aclReader = await groupNamed(service, 'Access list reader')
    const logReader = await groupNamed(service, 'Call log reader')
    const entryIds = async (groupId: number) =>
      (await db.selectFrom('api_group_acl').select('acl_id').where('group_id', '=', groupId).orderBy('acl_id').execute()).map((row) => Number(row.acl_id))
    const [weakEcho, weakDeep] = await entryIds(weak)
    const [strictAll, strictDeep] = await entryIds(strict)
    t.ok(weakEcho < strictAll && weakDeep < strictDeep, 'the weaker entries have the lower ids')

    const both = await insertKey(service, {}, [weak, strict, aclReader, logReader])

    await t.test('md5 on one entry, sha256 on another: md5 refused, sha256 accepted', async (t) => {
      const md5 = await service.call('GET', '/Probe/Echo', { key: both, hashMethod: 1 })
      t.equal(md5.status, 401)
      t.equal(md5.text, 'Error: Signature (x-apihmac) does not match.')
      t.equal((await service.call('GET', '/Probe/Echo', { key: both, hashMethod: 2 })).status, 401, 'sha1 refused as well')
      t.equal((await service.call('GET', '/Probe/Echo', { key: both, hashMethod: 5 })).status, 401, 'a stronger method than the one named is not the one named')
      const sha256 = await service.call('GET', '/Probe/Echo', { key: both, hashMethod: 3, headers: { 'x-LogLevel': '2' } })
      t.equal(sha256.status, 200)
      t.same(sha256.json, { Key: (await db.selectFrom('api_keys').select('display_name').where('id', '=', both.id).executeTakeFirstOrThrow()).display_name, Acl: '/Probe/Echo' }, 'the call carries the lowest-id entry (its Path), with the merged rule')
      // Memoised per profile and route: the second call decides the same way.
      t.equal((await service.call('GET', '/Probe/Echo', { key: both, hashMethod: 1 })).status, 401, 'md5 still refused from the memo')
      t.equal((await service.call('GET', '/Probe/Echo', { key: both, hashMethod: 3 })).status, 200, 'sha256 still accepted from the memo')

      const log = await service.call('POST', '/Api/Read/Log', { key: both, body: { LogRequestId: Number(sha256.headers.get('x-requestid')) } })
      t.equal(log.status, 200)
      t.equal(log.json.Api_Acl, weakEcho, "the log's Api_Acl is the lowest matching entry's id")
    })

    await t.test('a key holding only the weak group keeps md5 (the rule merges, it does not invent)', async (t) => {
      const weakOnly = await insertKey(service, {}, [weak])
      t.equal((await service.call('GET', '/Probe/Echo', { key: weakOnly, hashMethod: 1 })).status, 200)
      t.equal((await service.call('GET', '/Probe/Echo', { key: weakOnly, hashMethod: 3 })).status, 401)
    })

    await t.test("the key's own Require_Hash overrides the merged method", async (t) => {
      const md5Key = await insertKey(service, { require_hash: 1 }, [weak, strict])
      t.equal((await service.call('GET', '/Probe/Echo', { key: md5Key, hashMethod: 1 })).status, 200, 'key says md5: md5 accepted')
      t.equal((await service.call('GET', '/Probe/Echo', { key: md5Key, hashMethod: 3 })).status, 401, 'key says md5: sha256 refused')
      const sha512Key = await insertKey(service, { require_hash: 5 }, [weak, strict])
      t.equal((await service.call('GET', '/Probe/Echo', { key: sha512Key, hashMethod: 5 })).status, 200)
      t.equal((await service.call('GET', '/Probe/Echo', { key: sha512Key, hashMethod: 3 })).status, 401)
    })

    await t.test('one entry requiring HTTPS: plain HTTP is refused', async (t) => {
      const plain = await service.call('GET', '/Probe/Deep/Level/Three', { key: both })
      t.equal(plain.status, 403)
      t.equal(plain.text, 'Error: HTTPS is required for this key or path.')
      t.equal((await service.call('GET', '/Probe/Deep/Level/Three', { key: both, headers: { 'x-forwarded-proto': 'https' } })).status, 200, 'over HTTPS (the trusted proxy says so) it is allowed')
      const weakOnly = await insertKey(service, {}, [weak])
      t.equal((await service.call('GET', '/Probe/Deep/Level/Three', { key: weakOnly })).status, 200, 'the weak entry alone allows plain HTTP')
    })

    await t.test('GET /Api/Read/Acl lists both entries as stored', async (t) => {
      const answer = await service.call('GET', '/Api/Read/Acl', { key: both })
      t.equal(answer.status, 200)
      const byId = new Map<number, any>(answer.json.map((entry: { Id: number }) => [entry.Id, entry]))
      t.same(byId.get(weakEcho), { Path: '/Probe/Echo', Display_Name: 'echo with md5', Id: weakEcho, Is_Public: 0, Require_Https: 0, Require_Hash: 1 })
      t.same(byId.get(strictAll), { Path: '/Probe/*', Display_Name: 'all probes with sha256', Id: strictAll, Is_Public: 0, Require_Https: 0, Require_Hash: 3 })
      t.same(byId.get(weakDeep), { Path: '/Probe/Deep/Level/Three', Display_Name: 'deep over http', Id: weakDeep, Is_Public: 0, Require_Https: 0, Require_Hash: 0 })
      t.same(byId.get(strictDeep), { Path: '/Probe/Deep/*', Display_Name: 'deep over https only', Id: strictDeep, Is_Public: 0, Require_Https: 1, Require_Hash: 0 })
    })
  }),
)

t.test('anonymous calls to Is_Public paths follow the same rule', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin], config: { trustProxy: ['127.0.0.1'] } })
    const open = await service.call('GET', '/Probe/Public', { key: null })
    t.equal(open.status, 200, 'the probe plugin\'s public entry alone allows plain HTTP')
    t.same(open.json, { Anonymous: true })
    // A second public entry, made later (higher id), that requires HTTPS.
    await createGroup(service.kernel.database.db, { name: 'Public over https', paths: [{ path: '/Probe/Public', displayName: 'public, https only', isPublic: 1, requireHttps: 1 }] })
    service.kernel.services.keys.accessChanged()
    const plain = await service.call('GET', '/Probe/Public', { key: null })
    t.equal(plain.status, 403)
    t.equal(plain.text, 'Error: HTTPS is required for this key or path.')
    t.equal((await service.call('GET', '/Probe/Public', { key: null, headers: { 'x-forwarded-proto': 'https' } })).status, 200, 'over HTTPS it is allowed')
    const keyed = await insertKey(service)
    t.equal((await service.call('GET', '/Probe/Public', { key: keyed })).status, 403, 'a key calling the public path meets the same rule')
  }),
)
