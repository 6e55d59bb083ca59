/**
 * Tenant isolation (D9) in every people operation: a key of another Parent, or of
 * another Custno of the same Parent, sees nothing and changes nothing (empty / 404,
 * the same 404 as an unknown Id). A parent-wide key (Custno 0) sees all its customers.
 */
import t from 'tap'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { tenantKey } from './helpers/keys.ts'

type Key = { apiKey: string; secret: string }

const tinyPng = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64')

t.test('a key of another tenant sees and changes nothing', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const customer7 = await tenantKey(service, 1, 7)
    const customer8 = await tenantKey(service, 1, 8)
    const otherParent = await tenantKey(service, 2, 0)

    const mine = (await service.call('POST', '/People/Update/OneChange', { key: customer7, body: { FirstName: 'Seven', LastName: 'Person', Source_Id: 'X-1' } })).json
    t.match(mine, { Parent: 1, Custno: 7 }, 'created in the key\'s own scope')
    const theirs = (await service.call('POST', '/People/Update/OneChange', { key: otherParent, body: { FirstName: 'Two', LastName: 'Person', Source_Id: 'X-1' } })).json
    t.match(theirs, { Parent: 2, Custno: 0 }, 'the same Source_Id may exist in another tenant')
    const eight = (await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Eight', LastName: 'Person', Custno: 8 } })).json
    t.equal(eight.Custno, 8, 'a parent-wide key creates for any customer of its parent')

    const seen = async (key: Key | undefined, method: string, path: string, body?: unknown) => {
      const answer = await service.call(method, path, { key, body })
      t.equal(answer.status, 200, path)
      return Array.isArray(answer.json.People) ? answer.json.People.map((person: { Id: number }) => person.Id).sort() : []
    }
    for (const [method, path, body] of [
      ['GET', '/People/Read/Missing', undefined],
      ['POST', '/people/read/list', { IncludeDeleted: 1 }],
      ['POST', '/people/read/filtered', { filter: 'LastName=Person' }],
      ['POST', '/people/read/sorted', { sort: 'Id' }],
    ] as const) {
      t.same(await seen(customer7, method, path, body), [mine.Id], `${path}: Custno 7 sees only its own`)
      t.same(await seen(customer8, method, path, body), [eight.Id], `${path}: Custno 8 sees only its own`)
      t.same(await seen(otherParent, method, path, body), [theirs.Id], `${path}: Parent 2 sees only its own`)
      t.same(await seen(undefined, method, path, body), [mine.Id, eight.Id].sort(), `${path}: Parent 1 / Custno 0 sees all its customers`)
      t.same(await seen(customer7, method, path.includes('?') ? path : path + '?filter=Custno=8', body && !('filter' in body) ? body : undefined), [], `${path}: filtering on another Custno finds nothing`)
    }

    const unknown = await service.call('POST', '/People/Update/OneRemove', { body: { Id: 987654 } })
    for (const [path, body] of [
      ['/People/Update/OneChange', { Id: mine.Id, Title: 'Hacked' }],
      ['/People/Update/OnePhoto', { Id: mine.Id, Photo: 'https://evil.example/x.jpg' }],
      ['/People/Update/OnePhoto', { Id: mine.Id, Image: tinyPng.toString('base64') }],
      ['/People/Update/OneRemove', { Id: mine.Id }],
      ['/People/Update/OneRecall', { Id: mine.Id }],
      ['/People/Update/OneTerminate', { Id: mine.Id }],
    ] as const) {
      for (const [who, key] of [['Custno 8', customer8], ['Parent 2', otherParent]] as const) {
        const refused = await service.call('POST', path, { key, body })
        t.equal(refused.status, 404, `${path} by ${who}`)
        t.equal(refused.text, unknown.text.replace('987654', String(mine.Id)), `${path} by ${who}: the same answer as an unknown Id`)
      }
    }
    const untouched = await service.call('POST', '/people/read/filtered', { key: customer7, body: { filter: `Id=${mine.Id}`, IncludeDeleted: 1 } })
    t.match(untouched.json.People[0], { Title: '', Photo: '', Deleted: 0, TermDate: '' }, 'nothing was changed')

    const moved = await service.call('POST', '/People/Update/OneChange', { key: customer7, body: { Id: mine.Id, Custno: 8 } })
    t.equal(moved.status, 400, 'a customer key cannot move a person to another customer')
    t.match(moved.text, /^Error: Custno must be 7/)
    t.equal((await service.call('POST', '/People/Update/OneChange', { key: customer7, body: { LastName: 'X', Custno: 8 } })).status, 400)

    // Imports belong to the scope that started them.
    const theirImport = (await service.call('POST', '/people/update/importinit', { key: otherParent, body: {} })).json.ImportId
    for (const key of [customer7, undefined]) {
      const batch = await service.call('POST', '/people/update/importmass', { key, body: { ImportId: theirImport, People: [{ Source_Id: 'X-1', LastName: 'Taken' }] } })
      t.equal(batch.status, 404)
      t.equal(batch.text, `Error: Import ${theirImport} not found.`)
      t.equal((await service.call('POST', '/people/update/importterm', { key, body: { ImportId: theirImport } })).status, 404)
    }
    // Customer 7's import ends by terminating only customer 7's people not delivered.
    const extra = (await service.call('POST', '/People/Update/OneChange', { key: customer7, body: { LastName: 'Unlisted' } })).json
    const ownImport = (await service.call('POST', '/people/update/importinit', { key: customer7, body: {} })).json.ImportId
    const batch = await service.call('POST', '/people/update/importmass', { key: customer7, body: { ImportId: ownImport, People: [{ Source_Id: 'X-1', LastName: 'Person', FirstName: 'Seven' }] } })
    t.match(batch.json, { Added: 0, Changed: 0, Unchanged: 1, Rejected: 0 })
    const ended = await service.call('POST', '/people/update/importterm', { key: customer7, body: { ImportId: ownImport } })
    t.match(ended.json, { Terminated: 1 })
    const everyone = await service.call('POST', '/people/read/list', { body: { sort: 'Id' } })
    const terminated = everyone.json.People.filter((person: { TermDate: string }) => person.TermDate !== '').map((person: { Id: number }) => person.Id)
    t.same(terminated, [extra.Id], 'only the unlisted person of customer 7')
    const parent2 = await service.call('POST', '/people/read/list', { key: otherParent, body: {} })
    t.equal(parent2.json.People[0].TermDate, '', 'parent 2 untouched')
  }),
)
