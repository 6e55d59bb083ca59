/**
 * A plugin the kernel cannot serve as declared stops the start with one line naming the
 * plugin (and the route): a route a JavaScript plugin declared wrongly, a schema with
 * $ref, a setup that fails; a first start says where its root key went. A default group
 * named like an existing group is made under a name of its own: no group gains a path.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { defineRoute, type Plugin, type Route } from '../kernel/sdk.ts'
import { createKernel } from '../kernel/boot/kernel.ts'
import { loadConfig } from '../kernel/boot/config.ts'
import { createLogger, silentLogger } from '../kernel/observe/logger.ts'
import { RouteTable } from '../kernel/http/router.ts'
import { loadPlugins } from '../kernel/boot/pluginLoader.ts'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { createScratchDatabase } from './helpers/scratchDatabase.ts'
import { freePort } from './helpers/freePort.ts'
import { watchChild } from './helpers/childService.ts'

const repository = resolve(dirname(fileURLToPath(import.meta.url)), '..')

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
    ['a query string in the path', route({ path: '/Bad/Read/A?x=1' }), /^GET \/Bad\/Read\/A\?x=1 of plugin bad: a path has no \?, #, %, white space or control character/],
    ['a fragment', route({ path: '/Bad/Read/A#b' }), /: a path has no \?, #, %/],
    ['a percent escape', route({ path: '/Bad/Read/A%20B' }), /: a path has no \?, #, %/],
    ['white space', route({ path: '/Bad/Read/A B' }), /: a path has no \?, #, %, white space/],
    ['an empty segment', route({ path: '/Bad//Read/A' }), /^GET \/Bad\/\/Read\/A of plugin bad: a path has no empty segment \(no \/\/ and no trailing \/\)$/],
    ['a trailing slash', route({ path: '/Bad/Read/A/' }), /: a path has no empty segment/],
    ['a .. segment', route({ path: '/Bad/../Api/Read/Keys' }), /^GET \/Bad\/\.\.\/Api\/Read\/Keys of plugin bad: a path has no \. or \.\. segment$/],
    ['a . segment', route({ path: '/Bad/./Read' }), /: a path has no \. or \.\. segment$/],
    ['no xml root', route({ xml: undefined }), /^GET \/Bad\/Read\/A of plugin bad: xml.root is required/],
    ['a body schema with $ref', route({ method: 'POST', body: { type: 'object', $defs: { s: { type: 'string' } }, properties: { a: { $ref: '#/$defs/s' } } } }),
      /^POST \/Bad\/Read\/A of plugin bad: its body schema uses \$ref; write the referenced schema out/],
    ['an answer schema with $ref', route({ answer: { type: 'array', items: { $ref: '#/components/schemas/A' } } }),
      /^GET \/Bad\/Read\/A of plugin bad: its answer schema uses \$ref; write the referenced schema out/],
    ['an answer that is no schema', route({ answer: 'A list of A' }), /^GET \/Bad\/Read\/A of plugin bad: answer must be a JSON schema object$/],
    ['an invalid query schema', route({ query: { type: 'object', properties: { a: { type: 'strin' } } } }), /^GET \/Bad\/Read\/A of plugin bad: its query schema is invalid: schema is invalid/],
    ['a bad pattern', route({ query: { type: 'object', properties: { a: { type: 'string', pattern: '(' } } } }), /^GET \/Bad\/Read\/A of plugin bad: its query schema is invalid: /],
    // These three started and then answered the route's every call with a 500 (or carried a broken schema into the OpenAPI document).
    ['no handler', route({ handler: undefined }), /^GET \/Bad\/Read\/A of plugin bad: handler must be a function$/],
    ['a cache with no partition', route({ cache: { ttlSeconds: 60 } }), /^GET \/Bad\/Read\/A of plugin bad: cache is \{ ttlSeconds: a number above 0, partition: a function \}$/],
    ['a cache with a negative ttl', route({ cache: { ttlSeconds: -5, partition: () => 'p' } }), /^GET \/Bad\/Read\/A of plugin bad: cache is \{ ttlSeconds: a number above 0/],
    ['an invalid answer schema', route({ answer: { type: 'strng' } }), /^GET \/Bad\/Read\/A of plugin bad: its answer schema is invalid: /],
  ]
  for (const [name, declared, message] of cases) t.throws(() => new RouteTable('/v1.0').add('bad', declared), message, name)
  t.doesNotThrow(() => new RouteTable('/v1.0').add('good', route({})), 'a route as the types say')
  t.doesNotThrow(() => new RouteTable('/v1.0').add('good', route({ cache: { ttlSeconds: 0.5, partition: () => 'p' }, answer: { type: 'object', description: 'A', properties: { Id: { type: ['integer', 'null'], format: 'int64' } } } })), 'a cache and an answer as the types say')
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

t.test("a plugin name too long for MySQL's migrations table is refused at load, with one line and exit 1, on both engines", (t) =>
  forEachDatabase(t, async (t, kind) => {
    // migrations_<name> is a table: MySQL allows 64 characters, so a name has at most 53.
    const named = (name: string): Plugin => ({
      name,
      migrations: { '0001-x': { async up(db) { await db.schema.createTable(`t_${kind}`).addColumn('id', 'integer').execute() } } },
      setup: () => [],
    })
    const longest = `p${'-x'.repeat(26)}`
    t.equal(longest.length, 53)
    await startService(t, { kind, plugins: [named(longest)] })

    const tooLong = `${longest}y`
    const scratch = kind === 'mysql' ? await createScratchDatabase() : null
    const root = mkdtempSync(join(tmpdir(), 'keygate-long-name-'))
    t.teardown(async () => {
      rmSync(root, { recursive: true, force: true })
      await scratch?.drop()
    })
    const folder = join(root, 'plugin')
    mkdirSync(folder)
    writeFileSync(join(folder, 'package.json'), JSON.stringify({ type: 'module' }))
    writeFileSync(join(folder, 'index.js'), `export default { name: '${tooLong}', migrations: {}, setup: () => [] }`)
    const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(await freePort()), DATA_DIR: join(root, 'data'), PLUGINS: `keys,acl,${folder}` }
    delete env.CONFIG_FILE
    delete env.NODE_OPTIONS
    if (scratch) env.DATABASE_URL = scratch.url
    else delete env.DATABASE_URL
    const child = spawn(process.execPath, ['dist/kernel/boot/main.js'], { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
    const { output, exited } = watchChild(t, child)
    // A start that takes the name serves on: ended, so the test fails rather than waits.
    setTimeout(() => child.kill('SIGKILL'), 30_000).unref()
    t.same(await exited, { code: 1, signal: null }, output.text)
    const said = output.text.split('\n').filter((line) => line.startsWith('keygate: '))
    t.same(said, [`keygate: invalid setting plugins: ${folder}: plugin name '${tooLong}' is 54 characters long; at most 53 (its migrations table migrations_<name> must fit MySQL's 64)`], output.text)
    t.notMatch(output.text, /\n\s+at /, 'no stack')
  }),
)

t.test('a started plugin whose routes its change history does not add is served, with one warning naming them', async (t) => {
  const lines: { level: string; msg: string; plugin?: string; routes?: string[] }[] = []
  const logger = createLogger({ destination: { write: (line: string) => void lines.push(JSON.parse(line)) } })
  const route = (path: string) => defineRoute({ method: 'GET', path, xml: { root: 'A' }, handler: () => ({ A: 1 }) })
  const plugin: Plugin = {
    name: 'unrecorded',
    defaultGroups: [{ name: 'Unrecorded', paths: [{ path: '/Unrecorded/*', displayName: 'Unrecorded' }] }],
    history: [{ Date: '2026-11-27', Version: '1.0.0', Kind: 'added', Breaking: 0, Operation: 'GET /Unrecorded/Read/Known', Description: 'Known.' }],
    setup: () => [route('/Unrecorded/Read/Known'), route('/Unrecorded/Read/A'), route('/Unrecorded/Read/B')],
  }
  const service = await startService(t, { kind: 'sqlite', plugins: [plugin], logger })
  const warnings = lines.filter((line) => line.level === 'warn')
  t.equal(warnings.length, 1, JSON.stringify(warnings))
  t.match(warnings[0], {
    plugin: 'unrecorded',
    routes: ['GET /Unrecorded/Read/A', 'GET /Unrecorded/Read/B'],
    msg: 'plugin unrecorded: no "added" entry in its change history (history.json) for GET /Unrecorded/Read/A, GET /Unrecorded/Read/B; these routes are missing from GET /Api/Read/Changes and its feed',
  })
  t.equal((await service.call('GET', '/Unrecorded/Read/A')).status, 200, 'the route is served all the same')
})

t.test('migrations and sealed columns a JavaScript plugin declares wrongly are refused at load, naming the plugin', async (t) => {
  const plugin = (overrides: Record<string, unknown>) => ({ name: 'bad', setup: () => [], ...overrides }) as unknown as Plugin
  // Before: a TypeError after the kernel's migrations ("migrations[name].up is not a function", "columns.map is not a function").
  await t.rejects(loadPlugins([], [plugin({ migrations: [1, 2] })]), { message: `plugin 'bad': migrations is an object of { '0001-name': { up(db, dialect) } }` })
  await t.rejects(loadPlugins([], [plugin({ migrations: { '0001-x': {} } })]), { message: `plugin 'bad': migration '0001-x' needs an up(db, dialect) function` })
  await t.rejects(loadPlugins([], [plugin({ sealedColumns: 'x' })]), { message: `plugin 'bad': sealedColumns is an array of { table, idColumn, column, contextPrefix }` })
  await t.rejects(loadPlugins([], [plugin({ sealedColumns: [{ table: 't', idColumn: 'id', column: 'secret' }] })]), { message: `plugin 'bad': sealedColumns is an array of { table, idColumn, column, contextPrefix }, got {"table":"t","idColumn":"id","column":"secret"}` })
  await t.resolves(loadPlugins([], [plugin({ migrations: { '0001-x': { up: async () => {} } }, sealedColumns: [{ table: 't', idColumn: 'id', column: 'secret', contextPrefix: 'bad:' }] })]), 'as the types say')
})
