/**
 * The account plugin (D14): POST /account/read/user, POST /account/read/group,
 * GET /account/read/license, POST /account/read/player, each in json, xml and csv;
 * and its default group reaching an installation that started without the plugin.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'
import { groupNamed, insertKey, tenantKey } from './helpers/keys.ts'
import { addTestPlayer, setEntitlement } from './helpers/tenants.ts'
import { httpDate } from '../kernel/auth/apiDate.ts'

const userFields = ['Id', 'Api_Key', 'Name', 'Email', 'Phone', 'Parent', 'Custno', 'StartDate', 'EndDate', 'DayPass', 'Require_Https',
  'AllowHours', 'ResponseFormat', 'LogLevel', 'LogRaw', 'MaxHits', 'GroupId', 'Created', 'Created_By']
const licenseFields = ['Parent', 'Custno', 'Plugins', 'MaxKeys', 'MaxPeople', 'MaxPlayers', 'Keys', 'People', 'Players']

t.test('account reads', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const accountGroup = await groupNamed(service, 'Account readers')
    const aclGroup = await groupNamed(service, 'Access list reader')
    const created = Date.UTC(2026, 10, 20, 8, 0, 0)
    const key = await insertKey(service, {
      display_name: 'Front desk', parent: 4, custno: 2, email: 'desk@example.com', phone: '+47 1234', max_hits: '1000/1Hour',
      log_level: 1, allow_hours: 0.5, created_by: service.admin.id, start_date: created, end_date: null,
    }, [accountGroup, aclGroup], created)

    await t.test('POST /account/read/user', async (t) => {
      const user = await service.call('POST', '/account/read/user', { key })
      t.equal(user.status, 200)
      t.same(Object.keys(user.json), userFields, 'exactly the fields of D14, in order')
      t.same(user.json, {
        Id: key.id, Api_Key: key.apiKey, Name: 'Front desk', Email: 'desk@example.com', Phone: '+47 1234', Parent: 4, Custno: 2,
        StartDate: httpDate(created), EndDate: null, DayPass: 0, Require_Https: 0, AllowHours: 0.5, ResponseFormat: 'json',
        LogLevel: 1, LogRaw: 0, MaxHits: '1000/1Hour', GroupId: [aclGroup, accountGroup].sort((a, b) => a - b).join(','),
        Created: httpDate(created), Created_By: service.admin.id,
      })
      t.notMatch(user.text, key.secret, 'never the secret')
      const withBody = await service.call('POST', '/account/read/user', { key, body: {} })
      t.equal(withBody.status, 200, 'an empty object is fine')
      const unknown = await service.call('POST', '/account/read/user', { key, body: { Id: 1 } })
      t.equal(unknown.status, 400, 'no parameters taken')
      t.match(unknown.text, /^Error: /)
      const xml = await service.call('POST', '/account/read/user?format=xml', { key })
      t.equal(xml.status, 200)
      t.match(xml.headers.get('content-type'), /^application\/xml/)
      t.match(xml.text, /<User>/)
      t.match(xml.text, `<Api_Key>${key.apiKey}</Api_Key>`)
      t.match(xml.text, '<EndDate/>', 'null is an empty element')
      const csv = await service.call('POST', '/account/read/user?format=csv', { key })
      t.equal(csv.status, 200)
      t.match(csv.headers.get('content-type'), /^text\/csv/)
      const [header, row] = csv.text.split('\r\n')
      t.equal(header, userFields.join(','))
      t.match(row, `${key.id},${key.apiKey},Front desk,desk@example.com,`)
      t.equal((await service.call('POST', '/Account/Read/User', { key })).status, 200, 'any letter case')
    })

    await t.test('POST /account/read/group', async (t) => {
      const groups = await service.call('POST', '/account/read/group', { key })
      t.equal(groups.status, 200)
      t.same(groups.json, [
        { Id: aclGroup, Display_Name: 'Access list reader', Paths: ['/Api/Read/Acl'] },
        { Id: accountGroup, Display_Name: 'Account readers', Paths: ['/account/read/*'] },
      ].sort((a, b) => a.Id - b.Id))
      const xml = await service.call('POST', '/account/read/group', { key, headers: { accept: 'application/xml' } })
      t.match(xml.text, /<Groups>\s*<Group>\s*<Id>\d+<\/Id>\s*<Display_Name>/)
      t.match(xml.text, '<Paths>/account/read/*</Paths>')
      const csv = await service.call('POST', '/account/read/group?format=csv', { key })
      t.equal(csv.text.split('\r\n')[0], 'Id,Display_Name,Paths')
      t.match(csv.text, `${accountGroup},Account readers,/account/read/*`)
      const other = await insertKey(service, { parent: 4, custno: 2 }, [aclGroup])
      t.equal((await service.call('POST', '/account/read/group', { key: other })).status, 403, 'the path is in the account default group')
    })

    await t.test('GET /account/read/license', async (t) => {
      const empty = await service.call('GET', '/account/read/license', { key })
      t.equal(empty.status, 200)
      t.same(Object.keys(empty.json), licenseFields)
      t.same(empty.json, { Parent: 4, Custno: 2, Plugins: ['keys', 'acl', 'log', 'people', 'api', 'account', 'webhooks'], MaxKeys: null, MaxPeople: null, MaxPlayers: null, Keys: 2, People: 0, Players: 0 })

      await setEntitlement(service, 4, 2, { MaxKeys: 10, MaxPeople: 100, MaxPlayers: 3 })
      const peopleWriter = await tenantKey(service, 4, 2)
      for (const name of ['Ada', 'Bo']) {
        t.equal((await service.call('POST', '/People/Update/OneChange', { key: peopleWriter, body: { LastName: name } })).status, 200)
      }
      await addTestPlayer(service, 4, 2, 'Lobby')
      const license = await service.call('GET', '/account/read/license', { key })
      t.same(license.json, { Parent: 4, Custno: 2, Plugins: ['keys', 'acl', 'log', 'people', 'api', 'account', 'webhooks'], MaxKeys: 10, MaxPeople: 100, MaxPlayers: 3, Keys: 3, People: 2, Players: 1 },
        'a player key counts as a player, not as a key')
      const xml = await service.call('GET', '/account/read/license?format=xml', { key })
      t.match(xml.text, /<License>[\s\S]*<MaxKeys>10<\/MaxKeys>[\s\S]*<Players>1<\/Players>/)
      const csv = await service.call('GET', '/account/read/license?format=csv', { key })
      t.equal(csv.text, `${licenseFields.join(',')}\r\n4,2,"keys,acl,log,people,api,account,webhooks",10,100,3,3,2,1`)
    })

    await t.test("GET /account/read/license: the parent's maximum when it bounds the customer", async (t) => {
      const customer = await tenantKey(service, 6, 1)
      const neighbour = await tenantKey(service, 6, 2)
      const parentWide = await insertKey(service, { parent: 6, custno: 0 }, [accountGroup])
      const license = async (caller = customer) => {
        const { MaxKeys, MaxPeople, MaxPlayers, Keys, People, Players } = (await service.call('GET', '/account/read/license', { key: caller })).json
        return { MaxKeys, MaxPeople, MaxPlayers, Keys, People, Players }
      }
      const create = (name: string) =>
        service.call('POST', '/Api/Create/Key', { key: customer, today: true, body: { Display_Name: name, GroupId: aclGroup, Require_Https: 0 } })
      t.same(await license(), { MaxKeys: null, MaxPeople: null, MaxPlayers: null, Keys: 1, People: 0, Players: 0 }, 'no limit anywhere: its own counts')

      // Keys: 6/1 holds 1 of its own 5; the parent (3 keys) holds 3 of 3.
      await setEntitlement(service, 6, 1, { MaxKeys: 5, MaxPlayers: 1 })
      await setEntitlement(service, 6, 0, { MaxKeys: 3, MaxPeople: 3, MaxPlayers: 10 })
      for (const writer of [customer, neighbour]) {
        t.equal((await service.call('POST', '/People/Update/OneChange', { key: writer, body: { LastName: 'Ada' } })).status, 200)
      }
      t.same(await license(), { MaxKeys: 3, MaxPeople: 3, MaxPlayers: 1, Keys: 3, People: 2, Players: 0 },
        "the parent's MaxKeys and MaxPeople with the whole parent's counts; its own MaxPlayers with its own count")
      const refused = await create('over the parent')
      t.equal(refused.status, 403)
      t.equal(refused.text, 'Error: Tenant limit reached (MaxKeys 3).', 'the maximum the license shows')
      t.same(await license(parentWide), { MaxKeys: 3, MaxPeople: 3, MaxPlayers: 10, Keys: 3, People: 2, Players: 0 }, 'a parent-wide key: the parent only')

      // The parent has room for 7 more, the customer for 4: its own limit bounds it.
      await setEntitlement(service, 6, 0, { MaxKeys: 10 })
      t.same(await license(), { MaxKeys: 5, MaxPeople: 3, MaxPlayers: 1, Keys: 1, People: 2, Players: 0 })
      t.equal((await create('within both')).status, 200)

      // A larger maximum can still bound first: the parent has room for none (4 of 4), the customer for 1 (2 of 3).
      await setEntitlement(service, 6, 1, { MaxKeys: 3 })
      await setEntitlement(service, 6, 0, { MaxKeys: 4 })
      t.same(await license(), { MaxKeys: 4, MaxPeople: 3, MaxPlayers: 1, Keys: 4, People: 2, Players: 0 }, 'the one with less room, not the smaller maximum')
      const full = await create('over the parent again')
      t.equal(full.status, 403)
      t.equal(full.text, 'Error: Tenant limit reached (MaxKeys 4).')
    })

    await t.test('POST /account/read/player', async (t) => {
      const second = await addTestPlayer(service, 4, 2, 'Canteen', { dispGroup: 'Kitchen', location: 'B2' })
      await addTestPlayer(service, 4, 3, 'Elsewhere')
      const players = await service.call('POST', '/account/read/player', { key })
      t.equal(players.status, 200)
      t.same(players.json, [
        { Id: players.json[0].Id, Name: 'Lobby', DispGroup: '', Location: '', Last_Seen: null },
        { Id: second.playerId, Name: 'Canteen', DispGroup: 'Kitchen', Location: 'B2', Last_Seen: null },
      ], "only the caller's tenant")
      const parentWide = await insertKey(service, { parent: 4, custno: 0 }, [accountGroup])
      t.same((await service.call('POST', '/account/read/player', { key: parentWide })).json.map((player: { Name: string }) => player.Name), ['Lobby', 'Canteen', 'Elsewhere'],
        'a parent-wide key sees every customer of its parent')
      const xml = await service.call('POST', '/account/read/player?format=xml', { key })
      t.match(xml.text, /<Players>\s*<Player>\s*<Id>\d+<\/Id>\s*<Name>Lobby<\/Name>/)
      const csv = await service.call('POST', '/account/read/player?format=csv', { key })
      t.equal(csv.text.split('\r\n')[0], 'Id,Name,DispGroup,Location,Last_Seen')
      t.match(csv.text, `${second.playerId},Canteen,Kitchen,B2,`)
      const none = await insertKey(service, { parent: 5, custno: 1 }, [accountGroup])
      const empty = await service.call('POST', '/account/read/player', { key: none })
      t.same(empty.json, [])
    })
  }),
)

t.test('an installation that started without the account plugin gets its default group at the next start', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const before = await startService(t, { kind, config: { plugins: ['keys', 'acl', 'log', 'people'] } })
    t.equal((await before.call('POST', '/account/read/user')).status, 404, 'not enabled: no such path')
    const rows = await before.kernel.database.db.selectFrom('api_groups').select('id').where('display_name', '=', 'Account readers').execute()
    t.equal(rows.length, 0)
    const after = await before.restart({ plugins: ['keys', 'acl', 'log', 'people', 'account'] })
    const groupId = await groupNamed(after, 'Account readers')
    const held = await after.kernel.database.db.selectFrom('api_key_groups').select('group_id').where('key_id', '=', after.admin.id).where('group_id', '=', groupId).execute()
    t.equal(held.length, 1, 'the root admin key holds it')
    const user = await after.call('POST', '/account/read/user')
    t.equal(user.status, 200)
    t.equal(user.json.Id, after.admin.id)
  }),
)
