/**
 * A plugin the kernel cannot serve as declared stops the start with one line naming the
 * plugin (and the route): a default group that would take over another group, a route
 * a JavaScript plugin declared wrongly, a schema with $ref, a setup that fails. Nothing
 * is half made: no group gains a path, and a first start says where its root key went.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { defineRoute, type Plugin, type Route } from '../kernel/sdk.ts'
import { createKernel } from '../kernel/boot/kernel.ts'
import { loadConfig } from '../kernel/boot/config.ts'
import { silentLogger } from '../kernel/observe/logger.ts'
import { RouteTable } from '../kernel/http/router.ts'
import { forEachDatabase, startService } from './helpers/service.ts'

const groupPlugin = (groupName: string): Plugin => ({
  name: 'tickets',
  defaultGroups: [{ name: groupName, paths: [{ path: '/Tickets/*', displayName: 'Tickets' }] }],
  setup: () => [defineRoute({ method: 'GET', path: '/Tickets/Read/List', xml: { root: 'Tickets' }, handler: () => [] })],
})

t.test('a default group may not take the name of another group (only the admin group is shared)', (t) =>
  forEachDatabase(t, async (t, kind) => {
    await t.rejects(startService(t, { kind, plugins: [groupPlugin('Access list reader')] }),
      /^plugin tickets: its default group "Access list reader" has the name of plugin acl's default group; give the plugin's group a name of its own/,
      'two plugins of one start')

    const service = await startService(t, { kind })
    await service.kernel.database.db.insertInto('api_groups').values({ display_name: 'Ticket desk' }).execute()
    const entries = async (db = service.kernel.database.db) => (await db.selectFrom('api_acl').select('path').execute()).map((row) => row.path).sort()
    const before = await entries()
    await service.stop()
    const config = service.config
    await t.rejects(createKernel({ config, plugins: [groupPlugin('Ticket desk')], logger: silentLogger() }),
      /^plugin tickets: its default group "Ticket desk" has the name of an existing group;/, 'an operator\'s group')

    const admin = await createKernel({ config, plugins: [groupPlugin('Key administration')], logger: silentLogger() })
    const adminPaths = await admin.database.db.selectFrom('api_group_acl').innerJoin('api_acl', 'api_acl.id', 'api_group_acl.acl_id')
      .innerJoin('api_groups', 'api_groups.id', 'api_group_acl.group_id').select('api_acl.path').where('api_groups.display_name', '=', 'Key administration').execute()
    t.ok(adminPaths.some((row) => row.path === '/Tickets/*'), 'the admin group is joined')
    t.same((await entries(admin.database.db)).filter((path) => path !== '/Tickets/*'), before, 'the refused start added no ACL entry')
    await admin.close()
  }),
)

t.test('routes a JavaScript plugin declares wrongly are refused at start, naming the route', async (t) => {
  const route = (overrides: Record<string, unknown>) => ({ method: 'GET', path: '/Bad/Read/A', xml: { root: 'A' }, handler: () => ({}), ...overrides }) as unknown as Route
  const cases: [string, Route, RegExp][] = [
    ['a PUT route', route({ method: 'PUT' }), /^PUT \/Bad\/Read\/A of plugin bad: method must be GET or POST$/],
    ['a wildcard path', route({ path: '/Bad/Read/*' }), /^GET \/Bad\/Read\/\* of plugin bad: a path is one fixed path \(no \* or :\)$/],
    ['a path parameter', route({ path: '/Bad/Read/:id' }), /: a path is one fixed path/],
    ['no xml root', route({ xml: undefined }), /^GET \/Bad\/Read\/A of plugin bad: xml.root is required/],
    ['a body schema with $ref', route({ method: 'POST', body: { type: 'object', $defs: { s: { type: 'string' } }, properties: { a: { $ref: '#/$defs/s' } } } }),
      /^POST \/Bad\/Read\/A of plugin bad: its body schema uses \$ref; write the referenced schema out/],
    ['an invalid query schema', route({ query: { type: 'object', properties: { a: { type: 'strin' } } } }), /^GET \/Bad\/Read\/A of plugin bad: its query schema is invalid: schema is invalid/],
    ['a bad pattern', route({ query: { type: 'object', properties: { a: { type: 'string', pattern: '(' } } } }), /^GET \/Bad\/Read\/A of plugin bad: its query schema is invalid: /],
  ]
  for (const [name, declared, message] of cases) t.throws(() => new RouteTable('/v1.0').add('bad', declared), message, name)
  t.doesNotThrow(() => new RouteTable('/v1.0').add('good', route({})), 'a route as the types say')
})

t.test('a setup that fails names its plugin, and a first start says where its root key is', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-test-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const config = loadConfig({ port: 0, dataDir, databaseUrl: null }, {})
  const failing: Plugin = { name: 'bad', setup: () => { throw new Error('no licence file') } }
  await t.rejects(createKernel({ config, plugins: [failing], logger: silentLogger() }),
    { message: `plugin bad: setup failed: no licence file (this first start made the root admin key: it is in ${join(dataDir, 'admin-key.json')})` })
  const notArray = { name: 'bad', setup: () => ({}) } as unknown as Plugin
  await t.rejects(createKernel({ config, plugins: [notArray], logger: silentLogger() }), { message: 'plugin bad: setup must return an array of routes' }, 'a later start: no root key made')
})
