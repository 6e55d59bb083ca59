/**
 * A plugin the kernel cannot serve as declared stops the start with one line naming the
 * plugin (and the route): a route a JavaScript plugin declared wrongly, a schema with
 * $ref, a setup that fails; a first start says where its root key went. A default group
 * named like an existing group is made under a name of its own: no group gains a path.
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
import { forEachDatabase, startService, type Service } from './helpers/service.ts'

const groupPlugin = (groupName: string): Plugin => ({
  name: 'tickets',
  defaultGroups: [{ name: groupName, paths: [{ path: '/Tickets/*', displayName: 'Tickets' }] }],
  setup: () => [defineRoute({ method: 'GET', path: '/Tickets/Read/List', xml: { root: 'Tickets' }, handler: () => [] })],
})

t.test('a default group never joins another group of its name (only the admin group is shared)', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const groupsOf = async (db: Service['kernel']['database']['db']) => {
      const rows = await db.selectFrom('api_groups').leftJoin('api_group_acl', 'api_group_acl.group_id', 'api_groups.id').leftJoin('api_acl', 'api_acl.id', 'api_group_acl.acl_id')
        .select(['api_groups.display_name as name', 'api_acl.path as path']).execute()
      const groups = new Map<string, string[]>()
      for (const row of rows) groups.set(row.name, [...(groups.get(row.name) ?? []), ...(row.path ? [row.path] : [])].sort())
      return groups
    }
    // Two plugins of one start.
    const both = await startService(t, { kind, plugins: [groupPlugin('Access list reader')] })
    const fresh = await groupsOf(both.kernel.database.db)
    t.same(fresh.get('Access list reader'), ['/Api/Read/Acl'], "the acl plugin's group keeps its paths")
    t.same(fresh.get('Access list reader (plugin tickets)'), ['/Tickets/*'], 'the later one is made under a name of its own')

    // An operator's group of that name, on an existing installation.
    const service = await startService(t, { kind })
    await service.kernel.database.db.insertInto('api_groups').values({ display_name: 'Ticket desk' }).execute()
    await service.stop()
    const config = service.config
    const upgraded = await createKernel({ config, plugins: [groupPlugin('Ticket desk'), { ...groupPlugin('Ticket desk'), name: 'tickets2', setup: () => [] }], logger: silentLogger() })
    const groups = await groupsOf(upgraded.database.db)
    t.same(groups.get('Ticket desk'), [], "the operator's group gains no path")
    t.same(groups.get('Ticket desk (plugin tickets)'), ['/Tickets/*'])
    t.same(groups.get('Ticket desk (plugin tickets2)'), ['/Tickets/*'], 'each plugin its own')
    const rootGroups = await upgraded.database.db.selectFrom('api_key_groups').innerJoin('api_groups', 'api_groups.id', 'api_key_groups.group_id')
      .select('api_groups.display_name as name').where('api_key_groups.key_id', '=', service.admin.id).execute()
    t.ok(rootGroups.some((row) => row.name === 'Ticket desk (plugin tickets)'), 'given to the root admin key')
    await upgraded.close()

    // Made once: the next start makes no third group.
    const again = await createKernel({ config, plugins: [groupPlugin('Ticket desk')], logger: silentLogger() })
    t.equal([...(await groupsOf(again.database.db)).keys()].filter((name) => name.startsWith('Ticket desk')).length, 3)
    await again.close()

    const admin = await createKernel({ config, plugins: [{ ...groupPlugin('Key administration'), name: 'tickets3', setup: () => [] }], logger: silentLogger() })
    t.ok((await groupsOf(admin.database.db)).get('Key administration')!.includes('/Tickets/*'), 'the admin group is joined')
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
    ['an answer schema with $ref', route({ answer: { type: 'array', items: { $ref: '#/components/schemas/A' } } }),
      /^GET \/Bad\/Read\/A of plugin bad: its answer schema uses \$ref; write the referenced schema out/],
    ['an answer that is no schema', route({ answer: 'A list of A' }), /^GET \/Bad\/Read\/A of plugin bad: answer must be a JSON schema object$/],
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
