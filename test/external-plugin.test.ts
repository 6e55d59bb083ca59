/**
 * Plugins from outside the repository (issue 11): a config `plugins` entry may name a
 * folder or an installed npm package; such a plugin imports the public module as
 * `keygate/sdk` (package exports) and is mounted like a built-in one.
 */
import t, { type Test } from 'tap'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadPlugins } from '../kernel/boot/pluginLoader.ts'
import { forEachDatabase, startService } from './helpers/service.ts'

const repository = resolve(dirname(fileURLToPath(import.meta.url)), '..')

const pluginSource = (name: string, path: string) => `
import { badRequest, defineRoute, type Plugin } from 'keygate/sdk'

const plugin: Plugin = {
  name: '${name}',
  defaultGroups: [{ name: '${name} readers', paths: [{ path: '${path}', displayName: 'Say hello' }] }],
  setup: (kernel) => [
    defineRoute<undefined, { who?: string }>({
      method: 'GET',
      path: '${path}',
      query: { type: 'object', additionalProperties: false, properties: { who: { type: 'string', maxLength: 20 } } },
      xml: { root: 'Hello' },
      handler: (call) => {
        if (call.query.who === 'nobody') throw badRequest('Say hello to somebody.')
        return { Hello: call.query.who ?? call.caller.displayName, Plugin: '${name}', At: kernel.clock() > 0 }
      },
    }),
  ],
}
export default plugin
`

/** A folder that stands where a team's own repository would, with keygate installed beside it. */
function pluginWorkspace(t: Test) {
  const root = mkdtempSync(join(tmpdir(), 'keygate-external-'))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  mkdirSync(join(root, 'node_modules'))
  symlinkSync(repository, join(root, 'node_modules', 'keygate'), 'dir')
  return root
}

t.test('a plugin from a folder path imports keygate/sdk and answers signed calls', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const root = pluginWorkspace(t)
    const folder = join(root, 'hello-plugin')
    mkdirSync(folder)
    writeFileSync(join(folder, 'index.ts'), pluginSource('hello', '/Hello/Read/World'))
    const service = await startService(t, { kind, config: { plugins: ['keys', 'acl', 'log', 'people', 'account', folder] } })
    t.ok(service.kernel.routes().some((route) => route.plugin === 'hello' && route.path === '/Hello/Read/World'))
    const license = await service.call('GET', '/account/read/license')
    t.same(license.json.Plugins, ['keys', 'acl', 'log', 'people', 'account', 'hello'], 'the license names the plugin, never its folder')
    const hello = await service.call('GET', '/Hello/Read/World?who=team')
    t.equal(hello.status, 200)
    t.same(hello.json, { Hello: 'team', Plugin: 'hello', At: true })
    t.match(hello.headers.get('x-requestid'), /^\d+$/, 'logged like any call')
    const refused = await service.call('GET', '/Hello/Read/World?who=nobody')
    t.equal(refused.status, 400, "an error thrown with the plugin's own sdk import is the client's 400")
    t.equal(refused.text, 'Error: Say hello to somebody.')
    t.equal((await service.call('GET', '/Hello/Read/World?format=xml')).status, 200)
    const unsigned = await service.call('GET', '/Hello/Read/World', { key: null })
    t.equal(unsigned.status, 401, 'its routes are authenticated like every other')
  }),
)

t.test('a plugin from an installed npm package, found from the base folder', async (t) => {
  const root = pluginWorkspace(t)
  const packageFolder = join(root, 'node_modules', 'keygate-plugin-greeter')
  mkdirSync(packageFolder)
  writeFileSync(join(packageFolder, 'package.json'), JSON.stringify({ name: 'keygate-plugin-greeter', type: 'module', exports: './greeter.ts' }))
  writeFileSync(join(packageFolder, 'greeter.ts'), pluginSource('greeter', '/Greeter/Read/Hello'))
  const plugins = await loadPlugins(['acl', 'keygate-plugin-greeter'], [], root)
  t.same(plugins.map((plugin) => plugin.name), ['acl', 'greeter'])
  await t.rejects(loadPlugins(['keygate-plugin-missing'], [], root), /neither a built-in plugin, a folder nor an installed npm package/)
  await t.rejects(loadPlugins(['./no-such-folder'], [], root), /has no package.json or index file/)
  await t.rejects(loadPlugins(['keygate-plugin-greeter', 'keygate-plugin-greeter'.replace('greeter', 'greeter')], [], root), /loaded twice/)
})
