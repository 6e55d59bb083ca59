/**
 * The change history (D15): each plugin's history.json, merged newest first; every
 * mounted route has an entry that adds it; GET /Api/Read/Changes in json, xml and csv
 * and GET /Api/Read/Changes/Rss as RSS 2.0, both public. On SQLite and MariaDB.
 */
import t from 'tap'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { get } from 'node:http'
import { XMLParser } from 'fast-xml-parser'
import Papa from 'papaparse'
import { forEachDatabase, startService } from './helpers/service.ts'
import { loadConfig } from '../kernel/boot/config.ts'
import { loadPlugins } from '../kernel/boot/pluginLoader.ts'
import { withHistoryFile } from '../kernel/boot/pluginHistory.ts'
import type { HistoryEntry, Plugin } from '../kernel/plugin.ts'

const fields = ['Date', 'Version', 'Kind', 'Breaking', 'Operation', 'Description']

/** A plugin given as an object, carrying its history in the contract; one entry is breaking. */
const changedPlugin: Plugin = {
  name: 'changed',
  history: [
    { Date: '2099-01-01', Version: '9.0.0', Kind: 'modified', Breaking: 1, Operation: 'GET /Changed/Read/Thing', Description: 'Thing is now a list & <never> a single object.' },
    { Date: '2026-11-20', Version: '0.0.1', Kind: 'added', Breaking: 0, Operation: 'GET /Changed/Read/Thing', Description: 'A thing.' },
  ],
  setup: () => [{ method: 'GET', path: '/Changed/Read/Thing', xml: { root: 'Thing' }, handler: () => [] }],
}

/** fetch() sets Host itself; node:http sends the one given. */
function feedWithHost(port: number, host: string): Promise<string> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path: '/v1.0/Api/Read/Changes/Rss', headers: { host } }, (response) => {
      let text = ''
      response.setEncoding('utf8')
      response.on('data', (chunk) => (text += chunk))
      response.on('end', () => (response.statusCode === 200 ? resolve(text) : reject(new Error(`${response.statusCode} ${text}`))))
    }).on('error', reject)
  })
}

const operationOf = (route: { method: string; path: string }) => `${route.method} ${route.path}`.toLowerCase()

t.test('every route of every plugin enabled by default has an entry that adds it', async (t) => {
  const plugins = await loadPlugins(loadConfig({}, {}).plugins)
  t.ok(plugins.some((plugin) => plugin.name === 'api'), 'the api plugin is enabled by default')
  for (const plugin of plugins) {
    const history = plugin.history ?? []
    t.ok(history.length > 0, `plugin ${plugin.name} ships a history`)
    for (let index = 1; index < history.length; index++) t.ok(history[index - 1].Date >= history[index].Date, `${plugin.name}: entry ${index} is not newer than the one before (newest first)`)
  }
  // The service reports its package version (Servers, metrics): the newest entry's.
  const newest = plugins.flatMap((plugin) => plugin.history ?? []).sort((a, b) => b.Date.localeCompare(a.Date) || b.Version.localeCompare(a.Version, undefined, { numeric: true }))[0]
  t.equal(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version, newest.Version, 'package.json version is the newest history entry\'s')
  // The routes as a real start mounts them, on a throwaway SQLite.
  const service = await startService(t, { kind: 'sqlite' })
  const added = new Set(service.kernel.services.history().filter((entry) => entry.Kind === 'added').map((entry) => entry.Operation.toLowerCase()))
  const routes = service.kernel.services.routes()
  t.ok(routes.length >= 25)
  for (const route of routes) t.ok(added.has(operationOf(route)), `${route.method} ${route.path} (plugin ${route.plugin}) has an "added" entry in plugins/${route.plugin}/history.json`)
})

t.test('a history.json that does not fit the entry shape stops the start with its place named', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'keygate-history-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  const plugin: Plugin = { name: 'broken', setup: () => [] }
  writeFileSync(join(folder, 'history.json'), JSON.stringify([{ Date: '2026-11-23', Version: '0.2.0', Kind: 'changed', Breaking: 0, Operation: 'GET /X', Description: 'x' }]))
  t.throws(() => withHistoryFile(plugin, folder), { name: 'PluginError', message: `${join(folder, 'history.json')}, entry 0: /Kind must be equal to one of the allowed values` })
  writeFileSync(join(folder, 'history.json'), '[{')
  t.throws(() => withHistoryFile(plugin, folder), /history\.json is not valid JSON/)
  writeFileSync(join(folder, 'history.json'), JSON.stringify([{ Date: '23.11.2026', Version: '0.2.0', Kind: 'added', Breaking: 0, Operation: 'GET /X', Description: 'x' }]))
  t.throws(() => withHistoryFile(plugin, folder), /entry 0: \/Date must match pattern/)
  writeFileSync(join(folder, 'history.json'), JSON.stringify([{ Date: '2026-11-23', Version: '0.2.0', Kind: 'added', Breaking: 0, Operation: 'GET /X', Description: 'x' }]))
  t.equal(withHistoryFile(plugin, folder).history!.length, 1)
  t.equal(withHistoryFile({ ...plugin, history: [] }, folder).history!.length, 0, 'a history given in the contract wins')
})

t.test('GET /Api/Read/Changes: the merged history, newest first, public, in json, xml and csv', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [changedPlugin] })
    const history = service.kernel.services.history()
    const answer = await service.call('GET', '/Api/Read/Changes', { key: null })
    t.equal(answer.status, 200, 'no credentials needed')
    t.match(answer.headers.get('content-type'), /^application\/json/)
    const entries = answer.json as HistoryEntry[]
    t.same(entries, history)
    for (const entry of entries) t.same(Object.keys(entry), fields)
    t.same(entries[0], changedPlugin.history![0], 'the newest entry of any plugin comes first')
    t.same(entries.at(-1), changedPlugin.history![1], 'the oldest last')
    const version = (text: string) => text.split('.').map((part) => part.padStart(6, '0')).join('.')
    for (let index = 1; index < entries.length; index++) {
      const [before, after] = [entries[index - 1], entries[index]]
      t.ok(before.Date > after.Date || (before.Date === after.Date && version(before.Version) >= version(after.Version)), `newest first: ${before.Date} ${before.Version}, then ${after.Date} ${after.Version}`)
    }
    t.ok(entries.some((entry) => entry.Operation === 'GET /Api/Read/Acl' && entry.Kind === 'added' && entry.Date === '2026-11-22'), 'the seeded history')
    t.ok(entries.some((entry) => entry.Operation === 'GET /Api/Read/List' && entry.Version === '0.2.0'))
    t.equal((await service.call('GET', '/Api/Read/Changes')).status, 200, 'a signed call works as well')
    const unknown = await service.call('GET', '/Api/Read/Changes?page=2', { key: null })
    t.equal(unknown.status, 400, 'no query parameters but format')
    t.match(unknown.text, /^Error: /)

    const xml = await service.call('GET', '/Api/Read/Changes?format=xml', { key: null })
    t.equal(xml.status, 200)
    t.match(xml.headers.get('content-type'), /^application\/xml/)
    const parsed = new XMLParser({ parseTagValue: false }).parse(xml.text)
    const items = parsed.Changes.Change as Record<string, string>[]
    t.same(items.map((item) => ({ ...item, Breaking: Number(item.Breaking) })), entries)

    const csv = await service.call('GET', '/Api/Read/Changes?format=csv', { key: null })
    t.equal(csv.status, 200)
    t.match(csv.headers.get('content-type'), /^text\/csv/)
    const rows = Papa.parse<Record<string, string>>(csv.text, { header: true, skipEmptyLines: true })
    t.same(rows.meta.fields, fields)
    t.same(rows.data.map((row) => ({ ...row, Breaking: Number(row.Breaking) })), entries)
  }),
)

t.test('GET /Api/Read/Changes/Rss: an RSS 2.0 feed, one item per entry, stable guids', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [changedPlugin] })
    const history = service.kernel.services.history()
    const answer = await service.call('GET', '/Api/Read/Changes/Rss', { key: null })
    t.equal(answer.status, 200, 'public')
    t.equal(answer.headers.get('content-type'), 'application/rss+xml; charset=utf-8')
    const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '@', parseTagValue: false, isArray: (name) => name === 'item' })
    const feed = parser.parse(answer.text)
    t.equal(feed.rss['@version'], '2.0')
    const channel = feed.rss.channel
    t.equal(channel.title, 'keygate API changes')
    t.equal(channel.link, `http://127.0.0.1:${service.port}/v1.0/Api/Read/Changes`, 'the host the reader used')
    t.ok(channel.description)
    const items = channel.item as Record<string, any>[]
    t.equal(items.length, history.length, 'one item per entry')
    const guids = new Set<string>()
    items.forEach((item, index) => {
      const entry = history[index]
      t.equal(item.title, `${entry.Kind}: ${entry.Operation}${entry.Breaking ? ' [breaking]' : ''}`)
      t.equal(item.description, entry.Description)
      t.equal(item.category, entry.Kind)
      t.match(item.pubDate, /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} 00:00:00 GMT$/, 'an RFC 822 date')
      t.equal(new Date(item.pubDate).toISOString().slice(0, 10), entry.Date)
      t.equal(item.guid['@isPermaLink'], 'false')
      guids.add(item.guid['#text'])
    })
    t.equal(guids.size, items.length, 'every guid is different')
    t.equal(items[0].title, 'modified: GET /Changed/Read/Thing [breaking]')
    t.equal(items[0].description, 'Thing is now a list & <never> a single object.', 'text is escaped, not markup')

    // Stable: a restart (and a feed read through another host name) gives the same guids.
    const again = await service.restart()
    const reread = parser.parse(await feedWithHost(again.port, 'keygate.example:8443'))
    t.same((reread.rss.channel.item as Record<string, any>[]).map((item) => item.guid['#text']), [...guids])
    t.equal(reread.rss.channel.link, 'http://keygate.example:8443/v1.0/Api/Read/Changes')
    const odd = parser.parse(await feedWithHost(again.port, 'a"b<c'))
    t.equal(odd.rss.channel.link, `http://127.0.0.1:0/v1.0/Api/Read/Changes`, 'a Host header that is no host name is not echoed')
  }),
)
