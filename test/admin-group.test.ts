/**
 * The admin default group (D9, D14): the keys plugin's "Key administration", the group
 * that allows key creation. Another plugin's admin-only path (the api plugin's
 * GET /Api/Read/Servers) joins it, whatever order the plugins load in and whenever the
 * plugin is enabled; an installation from 0.3.1, where that path had a group of its own
 * that GET /Api/Read/Groups hid, is moved over at its next start.
 */
import t from 'tap'
import { sql } from 'kysely'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { groupNamed, insertKey, rootGroupIds } from './helpers/keys.ts'

async function pathsOf(service: Service, groupId: number): Promise<string[]> {
  const rows = await service.kernel.database.db.selectFrom('api_group_acl').innerJoin('api_acl', 'api_acl.id', 'api_group_acl.acl_id')
    .select('api_acl.path').where('api_group_acl.group_id', '=', groupId).orderBy('api_acl.path').execute()
  return rows.map((row) => row.path)
}

const adminPaths = ['/Api/Create/Key', '/Api/Edit/Key', '/Api/Read/Groups', '/Api/Read/Keys', '/Api/Read/Servers']

t.test('the servers path joins the admin group in either plugin order, and when the api plugin is enabled later', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const apiFirst = await startService(t, { kind, config: { plugins: ['api', 'keys', 'acl'] } })
    t.same(await pathsOf(apiFirst, await groupNamed(apiFirst, 'Key administration')), adminPaths, 'api loaded first: one group with both plugins\' paths')
    t.equal((await apiFirst.call('GET', '/Api/Read/Servers')).status, 200)

    const later = await startService(t, { kind, config: { plugins: ['keys', 'acl'] } })
    const admin = await groupNamed(later, 'Key administration')
    t.same(await pathsOf(later, admin), adminPaths.filter((path) => path !== '/Api/Read/Servers'))
    const tenantAdmin = await insertKey(later, { display_name: 'Tenant admin', parent: 2 }, [admin])
    const enabled = await later.restart({ plugins: ['keys', 'acl', 'api'] })
    t.same(await pathsOf(enabled, admin), adminPaths, 'the path joined the existing group')
    t.equal((await enabled.call('GET', '/Api/Read/Servers')).status, 200)
    t.equal((await enabled.call('GET', '/Api/Read/Servers', { key: tenantAdmin })).status, 200, 'every holder of the admin group')
    const restarted = await enabled.restart()
    t.same(await pathsOf(restarted, admin), adminPaths, 'joined once, not again at each start')
  }),
)

/** The groups as 0.3.1 made them: the servers path in "Service administration", held by the root key. */
async function asVersion031(service: Service, extraPath?: string): Promise<number> {
  const { db } = service.kernel.database
  const admin = await groupNamed(service, 'Key administration')
  const servers = await db.selectFrom('api_acl').select('id').where('path', '=', '/Api/Read/Servers').executeTakeFirstOrThrow()
  const former = Number((await db.insertInto('api_groups').values({ display_name: 'Service administration' }).executeTakeFirstOrThrow()).insertId)
  await db.updateTable('api_group_acl').set({ group_id: former }).where('group_id', '=', admin).where('acl_id', '=', servers.id).execute()
  if (extraPath) {
    const acl = Number((await db.insertInto('api_acl').values({ path: extraPath, display_name: 'added by the operator', is_public: 0, require_https: 0, require_hash: 0 }).executeTakeFirstOrThrow()).insertId)
    await db.insertInto('api_group_acl').values({ group_id: former, acl_id: acl }).execute()
  }
  await db.insertInto('api_key_groups').values({ key_id: service.admin.id, group_id: former }).execute()
  await sql`delete from migrations_kernel where name = ${'0011-servers-in-admin-group'}`.execute(db)
  return former
}

t.test('an installation from 0.3.1: the servers path moves into the admin group, and GET /Api/Read/Groups lists every other held group', (t) =>
  forEachDatabase(t, async (t, kind) => {
    let service = await startService(t, { kind })
    const former = await asVersion031(service)
    const tenantAdmin = await insertKey(service, { display_name: 'Tenant admin', parent: 2 }, [await groupNamed(service, 'Key administration')])
    t.equal((await service.call('GET', '/Api/Read/Servers', { key: tenantAdmin })).status, 403, 'before: the tenant admin lacks it')
    const rootBefore = await rootGroupIds(service)

    service = await service.restart()
    const { db } = service.kernel.database
    t.notOk(await db.selectFrom('api_groups').select('id').where('id', '=', former).executeTakeFirst(), 'the former group is gone')
    t.same(await db.selectFrom('api_key_groups').select('key_id').where('group_id', '=', former).execute(), [], 'and no key holds it')
    t.same(await pathsOf(service, await groupNamed(service, 'Key administration')), adminPaths)
    t.same((await rootGroupIds(service)).sort(), rootBefore.filter((id) => id !== former).sort())
    t.equal((await service.call('GET', '/Api/Read/Servers')).status, 200, 'the root key still reads it')
    t.equal((await service.call('GET', '/Api/Read/Servers', { key: tenantAdmin })).status, 200, 'and so does every admin')

    const held = (await service.call('POST', '/Account/Read/Group')).json as { Id: number; Display_Name: string }[]
    const listed = (await service.call('GET', '/Api/Read/Groups')).json as { Id: number }[]
    t.same(listed.map((group) => group.Id).sort(), held.filter((group) => group.Display_Name !== 'Key administration').map((group) => group.Id).sort(), 'D9: exactly the held groups but the admin group')

    const again = await service.restart()
    t.same(await pathsOf(again, await groupNamed(again, 'Key administration')), adminPaths, 'the next start changes nothing')
  }),
)

t.test('an installation from 0.3.1 whose operator gave the former group other paths keeps it, without the servers path', (t) =>
  forEachDatabase(t, async (t, kind) => {
    let service = await startService(t, { kind })
    const former = await asVersion031(service, '/Reports/Read/*')
    service = await service.restart()
    t.same(await pathsOf(service, former), ['/Reports/Read/*'], 'an ordinary group now')
    t.ok((await rootGroupIds(service)).includes(former), 'still held by the root key')
    t.same(await pathsOf(service, await groupNamed(service, 'Key administration')), adminPaths)
    const listed = (await service.call('GET', '/Api/Read/Groups')).json as { Id: number }[]
    t.ok(listed.some((group) => group.Id === former), 'and assignable')
  }),
)
