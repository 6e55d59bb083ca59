/**
 * Tenant entitlements (D14): MaxKeys, MaxPeople and MaxPlayers are enforced when a key,
 * a person (one, a recall, an import batch) or a player is created: at exactly the limit
 * it works, one past it answers 403 `Error: Tenant limit reached (Max... N).` and writes
 * nothing. A (Parent, 0) entitlement bounds every customer of the parent together.
 */
import t from 'tap'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { groupNamed, tenantKey, type TestKey } from './helpers/keys.ts'
import { addTestPlayer, setEntitlement } from './helpers/tenants.ts'

async function count(service: Service, table: 'api_keys' | 'tenant_players', parent: number, custno?: number): Promise<number> {
  const row = await service.kernel.database.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('count'))
    .where('parent', '=', parent).$if(custno !== undefined, (query) => query.where('custno', '=', custno!)).executeTakeFirstOrThrow()
  return Number(row.count)
}

async function peopleRows(service: Service, parent: number): Promise<number> {
  const db = service.kernel.database.db as unknown as import('kysely').Kysely<{ people: { parent: number } }>
  const row = await db.selectFrom('people').select((eb) => eb.fn.countAll<number>().as('count')).where('parent', '=', parent).executeTakeFirstOrThrow()
  return Number(row.count)
}

t.test('MaxKeys', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const admin = await tenantKey(service, 7, 0)
    const aclReader = await groupNamed(service, 'Access list reader')
    const create = (name: string, custno: number) =>
      service.call('POST', '/Api/Create/Key', { key: admin, today: true, body: { Display_Name: name, GroupId: aclReader, Require_Https: 0, Defaults: { Custno: custno } } })

    await setEntitlement(service, 7, 1, { MaxKeys: 2 })
    t.equal((await create('one', 1)).status, 200)
    t.equal((await create('two', 1)).status, 200, 'exactly at the limit')
    const refused = await create('three', 1)
    t.equal(refused.status, 403, 'one past it')
    t.equal(refused.text, 'Error: Tenant limit reached (MaxKeys 2).')
    t.equal(await count(service, 'api_keys', 7, 1), 2, 'nothing written')
    t.equal((await create('three', 1)).status, 403, 'the name was not taken by the refused create either')

    // The parent: its admin key and customer 1's two keys make 3 of 4.
    await setEntitlement(service, 7, 0, { MaxKeys: 4 })
    t.equal((await create('four', 2)).status, 200, 'the parent-wide limit reached by another customer')
    const parentFull = await create('five', 3)
    t.equal(parentFull.status, 403)
    t.equal(parentFull.text, 'Error: Tenant limit reached (MaxKeys 4).')
    t.equal(await count(service, 'api_keys', 7), 4)

    await setEntitlement(service, 7, 0, { MaxKeys: null })
    t.equal((await create('five', 3)).status, 200, 'null is unlimited again')

    // A disabled key (EndDate passed) frees its place.
    await setEntitlement(service, 7, 1, { MaxKeys: 2 })
    const keyOne = await service.kernel.database.db.selectFrom('api_keys').select('id').where('display_name', '=', 'one').where('parent', '=', 7).executeTakeFirstOrThrow()
    const disabled = await service.call('POST', '/Api/Edit/Key', { key: admin, today: true, body: { KeyId: Number(keyOne.id), EndDate: new Date(Date.now() - 1000).toUTCString() } })
    t.equal(disabled.status, 200)
    t.equal((await create('six', 1)).status, 200, 'a disabled key does not count')
    const enable = () => service.call('POST', '/Api/Edit/Key', { key: admin, today: true, body: { KeyId: Number(keyOne.id), EndDate: new Date(Date.now() + 86_400_000).toUTCString() } })
    const reenabled = await enable()
    t.equal(reenabled.status, 403, 'enabling it again would pass the limit')
    t.equal(reenabled.text, 'Error: Tenant limit reached (MaxKeys 2).')
    const stillEnded = await service.kernel.database.db.selectFrom('api_keys').select('end_date').where('id', '=', Number(keyOne.id)).executeTakeFirstOrThrow()
    t.ok(Number(stillEnded.end_date) < Date.now(), 'the edit wrote nothing')
    const six = await service.kernel.database.db.selectFrom('api_keys').select('id').where('display_name', '=', 'six').where('parent', '=', 7).executeTakeFirstOrThrow()
    const moved = await service.call('POST', '/Api/Edit/Key', { key: admin, today: true, body: { KeyId: Number(six.id), Defaults: { Custno: 2 } } })
    t.equal(moved.status, 200, 'moving a key to a customer with room')
    t.equal((await enable()).status, 200, 'and now there is room again')
    const back = await service.call('POST', '/Api/Edit/Key', { key: admin, today: true, body: { KeyId: Number(six.id), Defaults: { Custno: 1 } } })
    t.equal(back.status, 403, 'moving it back would pass the limit')
    t.equal(back.text, 'Error: Tenant limit reached (MaxKeys 2).')
    const license = await service.call('GET', '/account/read/license', { key: admin })
    t.equal(license.json.Keys, 6, 'the license counts the keys in use across the parent')

    // A move between customers leaves the parent's total as it was: a full parent does not refuse it.
    await setEntitlement(service, 7, 0, { MaxKeys: 6 })
    const across = await service.call('POST', '/Api/Edit/Key', { key: admin, today: true, body: { KeyId: Number(six.id), Defaults: { Custno: 3 } } })
    t.equal(across.status, 200, `a move inside a full parent: ${across.text}`)
  }),
)

t.test('MaxPeople', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const key: TestKey = await tenantKey(service, 8, 0)
    const add = (name: string) => service.call('POST', '/People/Update/OneChange', { key, body: { LastName: name } })
    await setEntitlement(service, 8, 0, { MaxPeople: 3 })
    const ids: number[] = []
    for (const name of ['A', 'B', 'C']) {
      const added = await add(name)
      t.equal(added.status, 200, `${name}: within the limit`)
      ids.push(added.json.Id)
    }
    const refused = await add('D')
    t.equal(refused.status, 403)
    t.equal(refused.text, 'Error: Tenant limit reached (MaxPeople 3).')
    t.equal(await peopleRows(service, 8), 3, 'nothing written')

    t.equal((await service.call('POST', '/People/Update/OneRemove', { key, body: { Id: ids[0] } })).status, 200)
    t.equal((await service.call('GET', '/account/read/license', { key })).json.People, 2, 'a deleted person does not count')

    const importId = (await service.call('POST', '/people/update/importinit', { key, body: {} })).json.ImportId
    const batch = (people: unknown[]) => service.call('POST', '/people/update/importmass', { key, body: { ImportId: importId, People: people } })
    const tooMany = await batch([{ Source_Id: 's1', LastName: 'E' }, { Source_Id: 's2', LastName: 'F' }])
    t.equal(tooMany.status, 403, 'two new people where one place is left')
    t.equal(tooMany.text, 'Error: Tenant limit reached (MaxPeople 3).')
    t.equal(await peopleRows(service, 8), 3, 'no row of the batch is written')
    const fits = await batch([{ Source_Id: 's1', LastName: 'E' }])
    t.equal(fits.status, 200, 'one new person fits exactly')
    t.equal(fits.json.Batch, 1, 'the refused batch was not counted either')
    t.equal(fits.json.Added, 1)
    const again = await batch([{ Source_Id: 's1', LastName: 'E changed' }])
    t.equal(again.status, 200, 'changing people already there needs no room')
    t.equal(again.json.Changed, 1)

    const recall = await service.call('POST', '/People/Update/OneRecall', { key, body: { Id: ids[0] } })
    t.equal(recall.status, 403, 'a recall would pass the limit')
    t.equal(recall.text, 'Error: Tenant limit reached (MaxPeople 3).')
    const still = await service.call('POST', '/people/read/filtered', { key, body: { filter: `Id=${ids[0]}`, IncludeDeleted: 1 } })
    t.equal(still.json.People[0].Deleted, 1, 'still deleted')

    await setEntitlement(service, 8, 0, { MaxPeople: 4 })
    t.equal((await service.call('POST', '/People/Update/OneRecall', { key, body: { Id: ids[0] } })).status, 200, 'with room it works')
    const license = await service.call('GET', '/account/read/license', { key })
    t.same([license.json.MaxPeople, license.json.People], [4, 4])

    // Racing creates take turns on the tenant's entitlement: exactly the room left is used.
    await setEntitlement(service, 8, 0, { MaxPeople: 6 })
    const racing = await Promise.all(['R1', 'R2', 'R3', 'R4', 'R5'].map((name) => add(name)))
    t.same(racing.map((answer) => answer.status).sort(), [200, 200, 403, 403, 403], 'two of five racing creates fit')
    t.equal(await peopleRows(service, 8), 6)

    // A parent-wide key moving a person into a full customer: refused like a create, nothing written.
    await setEntitlement(service, 8, 0, { MaxPeople: null })
    await setEntitlement(service, 8, 2, { MaxPeople: 1 })
    const inTwo = await service.call('POST', '/People/Update/OneChange', { key, body: { LastName: 'Two', Custno: 2 } })
    t.equal(inTwo.status, 200, inTwo.text)
    const moved = await service.call('POST', '/People/Update/OneChange', { key, body: { Id: ids[1], Custno: 2 } })
    t.equal(moved.status, 403, 'customer 2 is full')
    t.equal(moved.text, 'Error: Tenant limit reached (MaxPeople 1).')
    const stays = await service.call('POST', '/people/read/filtered', { key, body: { filter: `Id=${ids[1]}` } })
    t.equal(stays.json.People[0].Custno, 0, 'not moved')
    t.equal((await service.call('POST', '/People/Update/OneChange', { key, body: { Id: ids[1], Custno: 3 } })).status, 200, 'a customer with room')
    // The parent's own total does not change with a move: a full parent does not refuse it.
    await setEntitlement(service, 8, 0, { MaxPeople: await peopleRows(service, 8) })
    t.equal((await service.call('POST', '/People/Update/OneChange', { key, body: { Id: ids[1], Custno: 4 } })).status, 200, 'a move inside a full parent')
    t.equal((await service.call('POST', '/People/Update/OneChange', { key, body: { Id: ids[1], FirstName: 'Same place' } })).status, 200, 'a change without a move needs no room')
  }),
)

t.test('MaxPlayers', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    await setEntitlement(service, 9, 0, { MaxPlayers: 2 })
    await addTestPlayer(service, 9, 0, 'Lobby')
    await addTestPlayer(service, 9, 0, 'Canteen')
    const refused = await addTestPlayer(service, 9, 0, 'Garage').then(() => null, (error) => error)
    t.equal(refused?.status, 403)
    t.equal(refused?.message, 'Error: Tenant limit reached (MaxPlayers 2).')
    t.equal(await count(service, 'tenant_players', 9), 2, 'no player written')
    t.equal(await count(service, 'api_keys', 9), 2, 'and no key for it')
    const admin = await tenantKey(service, 9, 0)
    const license = await service.call('GET', '/account/read/license', { key: admin })
    t.same([license.json.MaxPlayers, license.json.Players, license.json.Keys], [2, 2, 1], 'players are not keys in the license')
  }),
)
