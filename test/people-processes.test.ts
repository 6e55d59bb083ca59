/**
 * Several processes on one MariaDB database without Redis (D16: "several hosts on one
 * database still work"): a people write on one process drops the cached listings of
 * that tenant on the others too (D11), through the database's partition changes
 * (kernel/cluster/partitionChanges.ts), within about a second instead of the listing's
 * hour. With Redis, pub/sub carries it at once (test/redis-shared.test.ts).
 */
import t, { type Test } from 'tap'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { createKernel } from '../kernel/boot/kernel.ts'
import { signedHeaders, type SigningKey } from '../kernel/auth/signature.ts'

/** A second process on the service's database (same MariaDB database, same master key). */
async function sibling(t: Test, service: Service): Promise<string> {
  const kernel = await createKernel({ config: { ...service.config, port: 0 }, report: () => undefined })
  t.teardown(() => kernel.close())
  return (await kernel.listen()).url
}

async function signedCall(base: string, key: SigningKey, method: string, path: string, body?: unknown) {
  const raw = body === undefined ? undefined : JSON.stringify(body)
  const headers: Record<string, string> = signedHeaders(key, method, path, raw, { date: new Date().toISOString() })
  if (raw !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(base + path, { method, headers, body: raw })
  return { status: response.status, json: await response.json() as any }
}

/** The answer of `read` once `done` holds, trying for up to `withinMs`; the last answer otherwise. */
async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean, withinMs: number): Promise<T> {
  const until = Date.now() + withinMs
  let value = await read()
  while (!done(value) && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    value = await read()
  }
  return value
}

t.test('without Redis, a people write on one process drops the cached listings on another', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // SQLite's processes are one host's cluster, whose primary relays every change (test/cluster.test.ts).
    if (kind === 'sqlite') return void t.pass('MariaDB only: the database several hosts share')
    const service = await startService(t, { kind })
    const otherBase = await sibling(t, service)
    const onOther = (method: string, path: string, body?: unknown) => signedCall(otherBase, service.admin, method, path, body)

    for (const name of ['Ada', 'Bea']) {
      t.equal((await service.call('POST', '/People/Update/OneChange', { body: { LastName: name } })).status, 200)
    }
    // The other process caches the tenant's listings (and their Total and page anchors).
    t.equal((await onOther('GET', '/People/Read/Missing')).json.Total, 2)
    t.same((await onOther('GET', '/People/Read/Missing?size=1&page=2')).json.People.map((person: { LastName: string }) => person.LastName), ['Bea'])
    t.equal((await onOther('GET', '/People/Read/Missing')).json.Total, 2, 'answered from its cache')

    // A write on the first process...
    t.equal((await service.call('POST', '/People/Update/OneChange', { body: { LastName: 'Aaron' } })).status, 200)
    const total = await eventually(async () => (await onOther('GET', '/People/Read/Missing')).json.Total, (value) => value === 3, 5_000)
    t.equal(total, 3, 'the other process lists the new person within a few seconds, not after its cached hour')
    const second = await eventually(async () => (await onOther('GET', '/People/Read/Missing?size=1&page=2')).json.People[0].LastName, (value) => value === 'Ada', 5_000)
    t.equal(second, 'Ada', 'its page anchors were dropped with the pages')

    // ...and the other way round, an import on the other process seen by the first.
    t.equal((await service.call('GET', '/People/Read/Missing')).json.Total, 3)
    const started = await onOther('POST', '/people/update/importinit', {})
    const imported = await onOther('POST', '/people/update/importmass', { ImportId: started.json.ImportId, People: [{ Source_Id: 'E9', LastName: 'Zed' }] })
    t.equal(imported.json.Added, 1)
    const seen = await eventually(async () => (await service.call('GET', '/People/Read/Missing')).json.Total, (value) => value === 4, 5_000)
    t.equal(seen, 4, 'the first process lists the imported person')
  }))
