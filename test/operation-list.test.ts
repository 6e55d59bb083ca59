/**
 * GET /Api/Read/List (D14): the operations a key may call now, one per mounted route
 * its ACL covers, in json, xml and csv; the list follows the key's groups, an
 * operator's ACL edit, DayPass and disabled plugins. On SQLite and MariaDB.
 */
import t, { type Test } from 'tap'
import { XMLParser } from 'fast-xml-parser'
import Papa from 'papaparse'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { adminOn } from './helpers/adminCli.ts'
import { groupNamed } from './helpers/keys.ts'
import type { SigningKey } from '../kernel/auth/signature.ts'
import { loadConfig } from '../kernel/boot/config.ts'

const fields = ['Method', 'Path', 'Display_Name', 'Plugin', 'Needs', 'Cached', 'Body', 'Query']

/** The public paths of the api plugin: in every key's ACL (Is_Public). */
const publicOperations = [
  'GET /Api/Read/Changes',
  'GET /Api/Read/Changes/Rss',
  'GET /Api/Read/OpenApi',
  'GET /Api/Read/Reference',
  'GET /Api/Read/Reference/reference.js',
  'GET /Api/Read/Reference/swagger-ui.css',
  'GET /Api/Read/Reference/swagger-ui-bundle.js',
]

const names = (list: Record<string, any>[]) => list.map((entry) => `${entry.Method} ${entry.Path}`).sort()

async function createKey(service: Service, groupIds: number[], extra: Record<string, unknown> = {}): Promise<SigningKey & { id: number }> {
  const answer = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: `List ${Math.random().toString(36).slice(2)}`, GroupId: groupIds, Require_Https: 0, ...extra }, today: true })
  if (answer.status !== 200) throw new Error(`create failed: ${answer.status} ${answer.text}`)
  return { id: answer.json.Id, apiKey: answer.json.Api_Key, secret: answer.json.Api_Secret }
}

async function listOf(t: Test, service: Service, key: SigningKey, options: { today?: boolean } = {}) {
  const answer = await service.call('GET', '/Api/Read/List', { key, today: options.today })
  t.equal(answer.status, 200, answer.text)
  return answer.json as Record<string, any>[]
}

t.test('the root key sees every mounted route, each entry in the D14 shape', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const answer = await service.call('GET', '/Api/Read/List')
    t.equal(answer.status, 200)
    t.match(answer.headers.get('content-type'), /^application\/json/)
    t.match(answer.headers.get('x-requestid'), /^\d+$/)
    const list = answer.json as Record<string, any>[]
    for (const entry of list) t.same(Object.keys(entry), fields, `${entry.Method} ${entry.Path} has the D14 fields in order`)
    t.same(names(list), service.kernel.routes().map((route) => `${route.method} ${route.path}`).sort(), 'one entry per mounted route')

    const create = list.find((entry) => entry.Path === '/Api/Create/Key')!
    t.same({ ...create, Body: undefined }, { Method: 'POST', Path: '/Api/Create/Key', Display_Name: 'Create API keys', Plugin: 'keys', Needs: 'key,date,hmac,today', Cached: 0, Body: undefined, Query: null })
    t.same(create.Body.required, ['Display_Name', 'GroupId'], 'Body is the route\'s own JSON schema')
    const acl = list.find((entry) => entry.Path === '/Api/Read/Acl')!
    t.same(acl, { Method: 'GET', Path: '/Api/Read/Acl', Display_Name: 'Read the ACL entries that apply to your key', Plugin: 'acl', Needs: 'key,date,hmac', Cached: 3600, Body: null, Query: null })
    const missing = list.find((entry) => entry.Path === '/People/Read/Missing')!
    t.equal(missing.Plugin, 'people')
    t.equal(missing.Display_Name, 'People without a photo, paged', 'under a wildcard entry, the name its plugin gives it')
    t.equal(list.find((entry) => entry.Path === '/People/Read/Photo')!.Display_Name, "A person's stored photo")
    t.equal(missing.Cached, 3600)
    t.equal(missing.Body, null)
    t.equal(missing.Query.type, 'object', 'Query is the route\'s query schema')
    t.ok(missing.Query.properties.page, 'with its parameters')
    const own = list.find((entry) => entry.Path === '/Api/Read/List')!
    t.same(own, { Method: 'GET', Path: '/Api/Read/List', Display_Name: 'List the operations you may call', Plugin: 'api', Needs: 'key,date,hmac', Cached: 0, Body: null, Query: null })
    // Query null means "takes none" (docs/api.md): so for every GET whose query takes no parameter but format.
    const noParameters = list.filter((entry) => entry.Query !== null && Object.keys(entry.Query.properties ?? {}).length === 0)
    t.same(noParameters.map((entry) => `${entry.Method} ${entry.Path}`), [], 'no route lists an empty query schema in place of null')

    // XML: the same entries; a schema is its JSON text (its keys are no XML names).
    const xml = await service.call('GET', '/Api/Read/List?format=xml')
    t.equal(xml.status, 200)
    t.match(xml.headers.get('content-type'), /^application\/xml/)
    const parsed = new XMLParser({ parseTagValue: false }).parse(xml.text)
    const items = parsed.Operations.Operation as Record<string, string>[]
    t.equal(items.length, list.length)
    const xmlCreate = items.find((item) => item.Path === '/Api/Create/Key')!
    t.equal(xmlCreate.Needs, 'key,date,hmac,today')
    t.same(JSON.parse(xmlCreate.Body), create.Body)
    t.equal(items.find((item) => item.Path === '/Api/Read/Acl')!.Body, '', 'null is an empty element')

    // CSV: one row per operation, the schema as JSON text in its cell.
    const csv = await service.call('GET', '/Api/Read/List', { headers: { accept: 'text/csv' } })
    t.equal(csv.status, 200)
    t.match(csv.headers.get('content-type'), /^text\/csv/)
    const rows = Papa.parse<Record<string, string>>(csv.text, { header: true, skipEmptyLines: true })
    t.same(rows.meta.fields, fields)
    t.equal(rows.data.length, list.length)
    const csvCreate = rows.data.find((row) => row.Path === '/Api/Create/Key')!
    t.same(JSON.parse(csvCreate.Body), create.Body)
    t.equal(csvCreate.Cached, '0')
  }),
)

t.test('what a key sees follows its groups, an operator\'s ACL edit and its DayPass', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const listReader = await groupNamed(service, 'Operation list reader')
    const aclReader = await groupNamed(service, 'Access list reader')
    const logReader = await groupNamed(service, 'Call log reader')
    const key = await createKey(service, [listReader, aclReader])

    t.same(names(await listOf(t, service, key)), ['GET /Api/Read/Acl', 'GET /Api/Read/List', 'POST /Api/Read/Acl', ...publicOperations].sort(), 'its own groups and the public paths')

    // An edit of the key's groups through the API shows on the very next call.
    const edited = await service.call('POST', '/Api/Edit/Key', { body: { KeyId: key.id, GroupId: [listReader, aclReader, logReader] }, today: true })
    t.equal(edited.status, 200, edited.text)
    t.same(names(await listOf(t, service, key)), ['GET /Api/Read/Acl', 'GET /Api/Read/Limits', 'GET /Api/Read/List', 'POST /Api/Read/Acl', 'POST /Api/Read/History', 'POST /Api/Read/Log', ...publicOperations].sort(), 'the call log group added three')
    const another = await createKey(service, [listReader, aclReader, logReader])
    t.same(names(await listOf(t, service, another)), names(await listOf(t, service, key)), 'a key with the same groups sees the same list')

    t.equal((await service.call('POST', '/Api/Edit/Key', { body: { KeyId: key.id, GroupId: [listReader] }, today: true })).status, 200)
    t.same(names(await listOf(t, service, key)), ['GET /Api/Read/List', ...publicOperations].sort(), 'groups taken away are gone at once')

    // The operator adds an ACL entry to the key's group with the admin CLI; the running
    // service picks it up within cache.keyTtlSeconds, which accessChanged() stands for.
    // Awaited, not execFileSync: the service runs in this process, and a blocked event
    // loop (the CLI took over 5 s on a slow machine) let its keep-alive timeout close the
    // client's idle connection just as the next fetch reused it (ECONNRESET).
    const run = await adminOn(service, 'acl', 'add', '--path', '/People/Read/*', '--name', 'Operator: people reads', '--group', String(listReader), '--json')
    t.equal(run.code, 0, run.stderr)
    const added = JSON.parse(run.stdout)
    t.equal(added.Path, '/People/Read/*')
    service.kernel.services.keys.accessChanged()
    const list = await listOf(t, service, key)
    t.same(names(list), ['GET /Api/Read/List', 'GET /People/Read/Missing', 'GET /People/Read/Photo', 'GET /People/Read/Today', 'GET /people/read/filtered', 'GET /people/read/list', 'GET /people/read/sorted', 'POST /people/read/filtered', 'POST /people/read/list', 'POST /people/read/sorted', ...publicOperations].sort(), 'the wildcard entry covers the people read routes')
    // A wildcard entry is not this operation's own name: the people plugin's name for it is.
    const summary = service.kernel.services.routes().find((route) => route.path === '/People/Read/Missing')!.summary
    t.ok(summary)
    t.equal(list.find((entry) => entry.Path === '/People/Read/Missing')!.Display_Name, summary, 'named by its plugin, not by the wildcard entry')
    t.equal(list.find((entry) => entry.Path === '/People/Read/Missing')!.Plugin, 'people')

    // A DayPass key needs the day code on every call, so every operation says so.
    const dayPass = await createKey(service, [listReader, aclReader], { DayPass: 1 })
    t.equal((await service.call('GET', '/Api/Read/List', { key: dayPass })).status, 401, 'refused without the day code')
    const dayPassList = await listOf(t, service, dayPass, { today: true })
    t.ok(dayPassList.length > 0)
    for (const entry of dayPassList) t.equal(entry.Needs, 'key,date,hmac,today', `${entry.Path} needs the day code for this key`)
    t.equal((await listOf(t, service, key)).find((entry) => entry.Path === '/Api/Read/List')!.Needs, 'key,date,hmac', 'and the other key still does not')

    // A key without the list's group may not call it.
    const plain = await createKey(service, [aclReader])
    const refused = await service.call('GET', '/Api/Read/List', { key: plain })
    t.equal(refused.status, 403)
    t.equal(refused.text, 'Error: Your ACL does not allow /Api/Read/List.')
    const anonymous = await service.call('GET', '/Api/Read/List', { key: null })
    t.equal(anonymous.status, 401, 'not public')
  }),
)

t.test('a disabled plugin\'s routes are not listed', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: { plugins: ['keys', 'acl', 'log', 'api'] } })
    const list = await listOf(t, service, service.admin)
    t.notOk(list.some((entry) => entry.Plugin === 'people' || entry.Path.toLowerCase().startsWith('/people/')), 'no people route')
    t.ok(list.some((entry) => entry.Path === '/Api/Read/Log'))
  }),
)

t.test('with the response cache switched off, nothing is listed as cached', async (t) => {
  const service = await startService(t, { kind: 'sqlite', config: { cache: { ...loadConfig({}, {}).cache, responses: false } } })
  const list = await listOf(t, service, service.admin)
  t.equal(list.find((entry) => entry.Path === '/Api/Read/Acl')!.Cached, 0)
  t.same(list.filter((entry) => entry.Cached !== 0), [])
})
