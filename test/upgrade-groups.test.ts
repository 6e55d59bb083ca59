/**
 * A default group a later version adds reaches the keys it is meant for (`alsoHeldBy`):
 * on an installation from before key rotation and webhooks, the tenant administrators
 * made then (holders of the admin group, keys that may create keys) may rotate the keys
 * they created and read their audit trail and webhooks after the upgrade, as issue 16
 * and 17 say ("same authority rules as edit", "keys that may create keys"); a key they
 * created gains nothing.
 */
import t from 'tap'
import { adminGroupName } from '../kernel/sdk.ts'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { groupNamed, insertKey, rootGroupIds } from './helpers/keys.ts'

const laterGroups = ['Key rotation and audit', 'Webhook administration']

/** The database as a version before these groups left it: no group, no marker that it was made. */
async function forgetLaterGroups(service: Service): Promise<void> {
  const db = service.kernel.database.db
  for (const name of laterGroups) {
    const groupId = await groupNamed(service, name)
    await db.deleteFrom('api_key_groups').where('group_id', '=', groupId).execute()
    await db.deleteFrom('api_group_acl').where('group_id', '=', groupId).execute()
    await db.deleteFrom('api_groups').where('id', '=', groupId).execute()
    await db.deleteFrom('kernel_settings').where('value', 'like', `%"group":"${name}"%`).execute()
  }
}

t.test('an upgrade gives the new administration groups to the admin group\'s holders only', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const before = await startService(t, { kind })
    await forgetLaterGroups(before)
    const adminGroups = await rootGroupIds(before)
    t.ok(adminGroups.includes(await groupNamed(before, adminGroupName)))
    const tenantAdmin = await insertKey(before, { display_name: 'Tenant 3 admin', parent: 3, custno: 0 }, adminGroups)
    const reader = await insertKey(before, { display_name: 'Tenant 3 reader', parent: 3, custno: 0, created_by: tenantAdmin.id }, [await groupNamed(before, 'Access list reader')])

    const service = await before.restart()
    const rotated = await service.call('POST', '/Api/Rotate/Key', { key: tenantAdmin, today: true, body: { KeyId: reader.id, OldSecretValidFor: 60 } })
    t.equal(rotated.status, 200, rotated.text)
    const audit = await service.call('POST', '/Api/Read/Audit', { key: tenantAdmin, body: {} })
    t.equal(audit.status, 200, audit.text)
    t.equal((await service.call('GET', '/Api/Read/Webhooks', { key: tenantAdmin })).status, 200)
    t.equal((await service.call('GET', '/Api/Read/Webhooks', { key: service.admin })).status, 200, 'the root admin key as before')

    const readerKey = { ...reader, secret: rotated.json.Api_Secret }
    const refused = await service.call('POST', '/Api/Read/Audit', { key: readerKey, body: {} })
    t.equal(refused.status, 403, 'a key the administrator created gains nothing')
    const held = await service.kernel.database.db.selectFrom('api_key_groups').select('group_id').where('key_id', '=', reader.id).execute()
    t.same(held.map((row) => Number(row.group_id)), [await groupNamed(service, 'Access list reader')])
  }))
