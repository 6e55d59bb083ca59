/**
 * Plugins from outside the repository (issue 11): a config `plugins` entry may name a
 * folder or an installed npm package; such a plugin imports the public module as
 * `keygate/sdk` (package exports) and is mounted like a built-in one.
 *
 * `keygate/sdk` is the build (dist/kernel/sdk.js), so in the tests run under tsx the
 * plugin holds another copy of the sdk than the kernel (kernel/*.ts): its errors and
 * answers must still be recognised. Under the production command both are dist/.
 */
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadPlugins } from '../kernel/boot/pluginLoader.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'
import { forEachDatabase, startService } from './helpers/service.ts'
import { freePort } from './helpers/freePort.ts'
import { watchChild } from './helpers/childService.ts'

const repository = resolve(dirname(fileURLToPath(import.meta.url)), '..')

const pluginSource = (name: string, path: string) => `
import { badRequest, defineRoute, JsonText, RawAnswer, type Plugin } from 'keygate/sdk'

const plugin: Plugin = {
  name: '${name}',
  defaultGroups: [{ name: '${name} readers', paths: [{ path: '${path}', displayName: 'Say hello' }, { path: '${path}/*', displayName: 'Say it otherwise' }] }],
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
    defineRoute({ method: 'GET', path: '${path}/Page', xml: { root: 'Page' }, rawContentType: 'text/html; charset=utf-8', handler: () => new RawAnswer('text/html; charset=utf-8', '<p>hello</p>') }),
    defineRoute({ method: 'GET', path: '${path}/Text', xml: { root: 'Hello' }, handler: () => new JsonText('{"Hello": "text"}') }),
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
    const page = await service.call('GET', '/Hello/Read/World/Page')
    t.same([page.status, page.headers.get('content-type'), page.text], [200, 'text/html; charset=utf-8', '<p>hello</p>'], "a RawAnswer of the plugin's sdk is sent as it is")
    t.equal((await service.call('GET', '/Hello/Read/World/Text')).text, '{"Hello": "text"}', 'a JsonText: its text')
    t.match((await service.call('GET', '/Hello/Read/World/Text?format=xml')).text, /<Hello>\s*<Hello>text<\/Hello>\s*<\/Hello>/, 'in xml: its value')
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
  await t.rejects(loadPlugins(['./no-such-folder'], [], root), { message: `plugin folder ${join(root, 'no-such-folder')} does not exist` })
  await t.rejects(loadPlugins(['keygate-plugin-greeter', 'keygate-plugin-greeter'.replace('greeter', 'greeter')], [], root), /loaded twice/)
})

t.test("a folder plugin may not take the kernel's name or a built-in plugin's, enabled or not", async (t) => {
  const root = pluginWorkspace(t)
  for (const name of ['kernel', 'people', 'webhooks', 'console']) {
    const folder = join(root, `taken-${name}`)
    mkdirSync(folder)
    writeFileSync(join(folder, 'index.ts'), pluginSource(name, `/Taken/Read/${name}`))
    await t.rejects(loadPlugins(['keys', folder], [], root), { message: `${folder}: plugin name '${name}' is reserved (${name === 'kernel' ? "the kernel's own" : 'a built-in plugin'}); give the plugin another name` })
  }
  t.same((await loadPlugins(['people'], [], root)).map((plugin) => plugin.name), ['people'], 'the built-in itself loads')
})

// Plain JavaScript, as a team's compiled plugin is: the production command runs no TypeScript.
const compiledPlugin = `
import { defineRoute, notFound, RawAnswer } from 'keygate/sdk'

export default {
  name: 'compiled',
  defaultGroups: [{ name: 'Compiled readers', paths: [{ path: '/Compiled/Read/*', displayName: 'Compiled plugin' }] }],
  setup: () => [
    defineRoute({ method: 'GET', path: '/Compiled/Read/Hello', xml: { root: 'Hello' }, handler: () => ({ Hello: 'compiled' }) }),
    defineRoute({ method: 'GET', path: '/Compiled/Read/Page', xml: { root: 'Page' }, handler: () => new RawAnswer('text/plain; charset=utf-8', 'page') }),
    defineRoute({ method: 'GET', path: '/Compiled/Read/Missing', xml: { root: 'Missing' }, handler: () => { throw notFound('No such thing.') } }),
  ],
}
`

t.test('the production command (node dist/kernel/boot/main.js) loads a compiled folder plugin', async (t) => {
  t.ok(existsSync(join(repository, 'dist', 'kernel', 'sdk.js')), 'the build is there (npm ci or npm run build makes it)')
  const root = pluginWorkspace(t)
  const folder = join(root, 'build', 'compiled')
  mkdirSync(folder, { recursive: true })
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ type: 'module', exports: './index.js' }))
  writeFileSync(join(folder, 'index.js'), compiledPlugin)
  const port = await freePort()
  const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(port), DATA_DIR: join(root, 'data'), PLUGINS: `keys,acl,${folder}` }
  delete env.DATABASE_URL
  delete env.CONFIG_FILE
  // No tsx here, whatever the test runner was started with.
  delete env.NODE_OPTIONS
  const child = spawn(process.execPath, ['dist/kernel/boot/main.js'], { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
  const { waitFor } = watchChild(t, child)
  await waitFor('keygate listening')
  const admin = JSON.parse(readFileSync(join(root, 'data', 'admin-key.json'), 'utf8'))
  const key = { apiKey: admin.Api_Key as string, secret: admin.Api_Secret as string }
  const call = async (path: string) => {
    const response = await fetch(`http://127.0.0.1:${port}/v1.0${path}`, { headers: signedHeaders(key, 'GET', path) })
    return { status: response.status, type: response.headers.get('content-type'), text: await response.text() }
  }
  const hello = await call('/Compiled/Read/Hello')
  t.equal(hello.status, 200, hello.text)
  t.same(JSON.parse(hello.text), { Hello: 'compiled' })
  t.same(await call('/Compiled/Read/Page'), { status: 200, type: 'text/plain; charset=utf-8', text: 'page' })
  t.match(await call('/Compiled/Read/Missing'), { status: 404, text: 'Error: No such thing.' }, 'an error of the sdk is the client\'s 4xx')
  t.equal((await fetch(`http://127.0.0.1:${port}/v1.0/Compiled/Read/Hello`)).status, 401, 'unsigned: refused')
  child.kill('SIGTERM')
})

t.test("a folder plugin's broken history.json stops the production start with one line that names it, exit 1", async (t) => {
  const root = pluginWorkspace(t)
  const folder = join(root, 'build', 'compiled')
  mkdirSync(folder, { recursive: true })
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ type: 'module', exports: './index.js' }))
  writeFileSync(join(folder, 'index.js'), compiledPlugin)
  writeFileSync(join(folder, 'history.json'), '[{"Date": "2026-11-27",')
  const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(await freePort()), DATA_DIR: join(root, 'data'), PLUGINS: `keys,acl,${folder}` }
  delete env.DATABASE_URL
  delete env.CONFIG_FILE
  delete env.NODE_OPTIONS
  const child = spawn(process.execPath, ['dist/kernel/boot/main.js'], { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
  const { output, exited } = watchChild(t, child)
  t.same(await exited, { code: 1, signal: null })
  const said = output.text.split('\n').filter((line) => line.startsWith('keygate: '))
  t.same(said.length, 1, output.text)
  t.match(said[0], new RegExp(`^keygate: invalid setting plugins: ${join(folder, 'history.json').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} is not valid JSON: `))
  t.notMatch(output.text, /\n\s+at /, 'no stack')
})

t.test('a package or folder is resolved as an ES module: exports with the import condition, exports without main', async (t) => {
  const root = pluginWorkspace(t)
  // The usual ESM-only package.json, installed under node_modules (npm install).
  const packageFolder = join(root, 'node_modules', 'keygate-plugin-notes')
  mkdirSync(join(packageFolder, 'build'), { recursive: true })
  writeFileSync(join(packageFolder, 'package.json'), JSON.stringify({ name: 'keygate-plugin-notes', type: 'module', exports: { '.': { types: './build/index.d.ts', import: './build/index.js' } } }))
  writeFileSync(join(packageFolder, 'build', 'index.js'), compiledPlugin.replace("name: 'compiled'", "name: 'notes'"))
  t.same((await loadPlugins(['keygate-plugin-notes'], [], root)).map((plugin) => plugin.name), ['notes'], 'the import condition')

  // A folder whose package.json has exports and no main.
  const folder = join(root, 'my-plugin')
  mkdirSync(join(folder, 'build'), { recursive: true })
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ type: 'module', exports: { '.': './build/index.js' } }))
  writeFileSync(join(folder, 'build', 'index.js'), compiledPlugin)
  t.same((await loadPlugins([folder], [], root)).map((plugin) => plugin.name), ['compiled'], 'a folder: exports "." without main')

  // An existing folder is never called "not a folder": the error names it and what it lacks.
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ type: 'module', exports: { '.': { require: './build/index.cjs' } } }))
  await t.rejects(loadPlugins([folder], [], root), { message: `plugin folder ${folder}: its package.json exports no "." for import (conditions import, node or default)` })
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ type: 'module', exports: './dist/index.js' }))
  await t.rejects(loadPlugins([folder], [], root), { message: `plugin folder ${folder}: its package.json exports "." as ./dist/index.js, which does not exist in ${folder} (is it built?)` })
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ type: 'module' }))
  await t.rejects(loadPlugins([folder], [], root), { message: `plugin folder ${folder}: the folder ${folder} has no entry point (package.json "exports" or "main", or index.ts, index.js, index.mjs)` })
  writeFileSync(join(folder, 'package.json'), JSON.stringify({ type: 'module', main: 'build/index.js' }))
  t.same((await loadPlugins([folder], [], root)).map((plugin) => plugin.name), ['compiled'], 'main, without exports')
})
