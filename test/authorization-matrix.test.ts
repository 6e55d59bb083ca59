/**
 * Function-level authorisation on every mounted route (OWASP API5): an inactive key,
 * a not-yet-active key and a key without the route's group are refused everywhere, with
 * the status of D6 and no data. Object-level checks (another tenant's key, person or log
 * record: 404) are in the keys, people and call-log tests.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'
import { insertKey } from './helpers/keys.ts'

t.test('every route refuses inactive keys and keys without its group', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const now = Date.now()
    const disabled = await insertKey(service, { end_date: now - 1000 })
    const notYet = await insertKey(service, { start_date: now + 3_600_000 })
    const noGroups = await insertKey(service, {}, [])
    const routes = service.kernel.routes()
    t.ok(routes.length >= 15)
    // The public paths of the bootstrap (D15) are in every key's ACL.
    const publicPaths = new Set(service.kernel.services.routes().filter((route) => route.publicByDefault).map((route) => `${route.method} ${route.path}`))
    for (const route of routes) {
      const body = route.method === 'POST' ? {} : undefined
      for (const [name, key] of [['disabled', disabled], ['not yet active', notYet]] as const) {
        const answer = await service.call(route.method, route.path, { key, body, today: true })
        t.equal(answer.status, 401, `${route.method} ${route.path}: ${name} key`)
        t.equal(answer.text, 'Error: Unknown or inactive API key.')
      }
      const refused = await service.call(route.method, route.path, { key: noGroups, body, today: true })
      if (publicPaths.has(`${route.method} ${route.path}`)) {
        t.equal(refused.status, 200, `${route.method} ${route.path}: Is_Public, so open to a key without groups`)
        continue
      }
      t.equal(refused.status, 403, `${route.method} ${route.path}: key without its group`)
      t.equal(refused.text, `Error: Your ACL does not allow ${route.path}.`)
    }
  }),
)
