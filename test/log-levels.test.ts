/**
 * GET /Access/Level/List (D14): the log levels and the record fields each one stores,
 * held against records the log stage really writes; and its default group, which a
 * database made before it existed gets on the next start, for the root key only.
 */
import t from 'tap'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { groupNamed, insertKey, rootGroupIds } from './helpers/keys.ts'

const minimal = ['RequestTime', 'Http_Host', 'Server_Name', 'Server_Addr', 'Server_Port', 'Remote_Addr', 'Request_Scheme', 'Request_Method', 'Api_Acl', 'Api_Function', 'Response_Code', 'Bandwidth', 'Response_Format', 'Seconds', 'Secret']
const medium = minimal
const high = [...medium, 'Request_Url', 'Http_User_Agent', 'Raw_Request', 'Rsponse']
const expected = [
  { Level: 0, Name: 'minimal', Stores: minimal },
  { Level: 1, Name: 'medium', Stores: medium },
  { Level: 2, Name: 'high', Stores: high },
]

t.test('GET /Access/Level/List in json, xml and csv', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const json = await service.call('GET', '/Access/Level/List')
    t.equal(json.status, 200)
    t.match(json.headers.get('content-type'), /^application\/json/)
    t.same(json.json, expected)
    t.same(json.json.map((level: object) => Object.keys(level)), [['Level', 'Name', 'Stores'], ['Level', 'Name', 'Stores'], ['Level', 'Name', 'Stores']])

    const xml = await service.call('GET', '/access/level/list?format=xml')
    t.equal(xml.status, 200)
    t.match(xml.headers.get('content-type'), /^application\/xml/)
    const items = [...xml.text.matchAll(/<LogLevel>([\s\S]*?)<\/LogLevel>/g)].map((match) => match[1])
    t.equal(items.length, 3)
    t.match(xml.text, /^<\?xml version="1.0" encoding="UTF-8"\?>\n<LogLevels>\n/)
    items.forEach((item, index) => {
      t.match(item, `<Level>${index}</Level>`)
      t.match(item, `<Name>${expected[index].Name}</Name>`)
      t.same([...item.matchAll(/<Stores>([^<]*)<\/Stores>/g)].map((match) => match[1]), expected[index].Stores)
    })

    const csv = await service.call('GET', '/Access/Level/List?format=csv')
    t.equal(csv.status, 200)
    t.match(csv.headers.get('content-type'), /^text\/csv/)
    t.equal(csv.text, ['Level,Name,Stores', ...expected.map((level) => `${level.Level},${level.Name},"${level.Stores.join(',')}"`)].join('\r\n'))

    const reader = await insertKey(service, {}, [await groupNamed(service, 'Access list reader')])
    const refused = await service.call('GET', '/Access/Level/List', { key: reader })
    t.equal(refused.status, 403)
    t.equal(refused.text, 'Error: Your ACL does not allow /Access/Level/List.')
  }),
)

t.test('x-LogLevel is any whole number: 100 and 002 are level 2, as a key\'s LogLevel of 100 is', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    for (const header of ['100', '002', '12345678901234567890']) {
      const made = await service.call('GET', '/Api/Read/Acl', { headers: { 'x-LogLevel': header } })
      t.equal(made.status, 200)
      const read = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: Number(made.headers.get('x-requestid')) } })
      t.equal(read.status, 200)
      t.equal(read.json.Request_Url, '/v1.0/Api/Read/Acl', `x-LogLevel ${header} stores the details`)
    }
    // Not a whole number: ignored, the key's own level (0) holds.
    const odd = await service.call('GET', '/Api/Read/Acl', { headers: { 'x-LogLevel': '2.5' } })
    const kept = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: Number(odd.headers.get('x-requestid')) } })
    t.equal(kept.json.Request_Url, null)
  }),
)

t.test('each level stores exactly what the list says (a successful call read back)', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    for (const level of [0, 1, 2, 5]) {
      const made = await service.call('GET', '/Api/Read/Acl', { headers: { 'x-LogLevel': String(level) } })
      t.equal(made.status, 200)
      const read = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: Number(made.headers.get('x-requestid')) } })
      t.equal(read.status, 200)
      const kept = Object.entries(read.json).filter(([, value]) => value !== null).map(([name]) => name).sort()
      t.same(kept, [...expected[Math.min(level, 2)].Stores].sort(), `level ${level} keeps the fields of level ${Math.min(level, 2)}`)
    }
  }),
)

/** Makes the database look as one made before the log plugin had its level group. */
async function asBeforeTheLevelGroup(service: Service): Promise<void> {
  const { db } = service.kernel.database
  const group = await groupNamed(service, 'Log level reader')
  const acl = await db.selectFrom('api_group_acl').select('acl_id').where('group_id', '=', group).execute()
  await db.deleteFrom('api_key_groups').where('group_id', '=', group).execute()
  await db.deleteFrom('api_group_acl').where('group_id', '=', group).execute()
  await db.deleteFrom('api_acl').where('id', 'in', acl.map((row) => row.acl_id)).execute()
  await db.deleteFrom('api_groups').where('id', '=', group).execute()
  // Older versions remembered only that a plugin's groups were made, not which.
  await db.deleteFrom('kernel_settings').where('name', 'like', 'default_group_%').execute()
}

t.test('a new default group of an existing plugin: made on an existing database, for the root key only', (t) =>
  forEachDatabase(t, async (t, kind) => {
    let service = await startService(t, { kind })
    await asBeforeTheLevelGroup(service)
    const { db } = service.kernel.database
    // Another key holding every group there was; and an operator took one group from the root key.
    const other = await insertKey(service, { display_name: 'older key' })
    const callLogReader = await groupNamed(service, 'Call log reader')
    await db.deleteFrom('api_key_groups').where('key_id', '=', service.admin.id).where('group_id', '=', callLogReader).execute()
    const otherGroups = (await db.selectFrom('api_key_groups').select('group_id').where('key_id', '=', other.id).execute()).map((row) => Number(row.group_id)).sort()
    const groupsBefore = await db.selectFrom('api_groups').select(['id', 'display_name']).orderBy('id').execute()
    const rootBefore = (await rootGroupIds(service)).sort()

    service = await service.restart()
    const after = service.kernel.database.db
    const groupsAfter = await after.selectFrom('api_groups').select(['id', 'display_name']).orderBy('id').execute()
    t.same(groupsAfter.slice(0, groupsBefore.length), groupsBefore, 'the older groups are as they were (none made twice)')
    t.same(groupsAfter.slice(groupsBefore.length).map((group) => group.display_name), ['Log level reader'], 'only the new group is made')
    const levelGroup = Number(groupsAfter[groupsAfter.length - 1].id)
    const paths = await after.selectFrom('api_group_acl').innerJoin('api_acl', 'api_acl.id', 'api_group_acl.acl_id').select('api_acl.path').where('api_group_acl.group_id', '=', levelGroup).execute()
    t.same(paths.map((row) => row.path), ['/Access/Level/List'])
    t.same((await rootGroupIds(service)).sort(), [...rootBefore, levelGroup].sort(), 'the root key gets the new group, and not the group the operator took away')
    const otherAfter = (await after.selectFrom('api_key_groups').select('group_id').where('key_id', '=', other.id).execute()).map((row) => Number(row.group_id)).sort()
    t.same(otherAfter, otherGroups, 'no other key gets anything')

    t.equal((await service.call('GET', '/Access/Level/List')).status, 200)
    const refused = await service.call('GET', '/Access/Level/List', { key: other })
    t.equal(refused.status, 403)
    t.equal(refused.text, 'Error: Your ACL does not allow /Access/Level/List.')

    service = await service.restart()
    // The harness stops the service it started and its first restart; this second one is ours.
    const third = service
    t.teardown(() => third.stop())
    const again = await service.kernel.database.db.selectFrom('api_groups').select(['id', 'display_name']).orderBy('id').execute()
    t.same(again, groupsAfter, 'a further start makes nothing')
    t.same((await rootGroupIds(service)).sort(), [...rootBefore, levelGroup].sort())
  }),
)
