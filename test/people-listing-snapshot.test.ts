/**
 * A people listing's Total agrees with the people it lists (D11), also while people are
 * being written. A write is committed a moment before it drops the scope's cached
 * listings (and, on MariaDB, a count and a page are separate statements): a listing
 * answered in that moment must not pair the Total remembered before the write with a
 * page read after it. The moment is made here by changing a row straight in the
 * database, which is a committed write whose drop has not come yet.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'

t.test('a listing never answers a Total that disagrees with the people it lists', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const ids: number[] = []
    for (const name of ['Ada', 'Bea', 'Cy']) {
      const created = await service.call('POST', '/People/Update/OneChange', { body: { LastName: name } })
      t.equal(created.status, 200)
      ids.push(created.json.Id)
    }
    // The Total is counted once and remembered for the scope's listings.
    t.equal((await service.call('POST', '/people/read/list', { body: {} })).json.Total, 3)

    // A write committed, its drop of the cached listings not yet made.
    await service.kernel.database.db.updateTable('people' as never).set({ deleted: 1 } as never).where('id' as never, '=', ids[0] as never).execute()
    const lastPage = (await service.call('POST', '/people/read/list', { body: { size: 50 } })).json
    t.equal(lastPage.Total, lastPage.People.length, `Total ${lastPage.Total} with ${lastPage.People.length} people listed`)
    t.equal(lastPage.Page, '1 of 1')

    // And one more than the Total on a page that is not the last.
    await service.kernel.database.db.updateTable('people' as never).set({ deleted: 0 } as never).where('id' as never, '=', ids[0] as never).execute()
    const firstPage = (await service.call('POST', '/people/read/list', { body: { size: 2 } })).json
    t.equal(firstPage.Total, 3, 'the Total counts every person the pages will list')
    t.equal(firstPage.Page, '1 of 2')
    t.equal(firstPage.People.length, 2)
  }))
