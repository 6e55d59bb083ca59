/**
 * The console's static files (kernel/http/staticFiles.ts, issue 18): served outside the
 * base path without credentials, with a strict CSP, nosniff and no-referrer on every
 * answer; GET and HEAD only; no path leaves the folder (raw `..`, encoded dots,
 * backslashes); index.html for the mount and unknown pages; hashed assets immutable;
 * ETag and 304; /console redirects; a missing build is a clear 503; console.enabled
 * false turns it off. Over raw HTTP, so no client normalises the paths first.
 */
import t from 'tap'
import { request } from 'node:http'
import { existsSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { startService } from './helpers/service.ts'
import type { Plugin } from '../kernel/plugin.ts'

function raw(port: number, method: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const call = request({ host: '127.0.0.1', port, method, path, headers }, (response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk) => (body += chunk))
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body }))
    })
    call.on('error', reject)
    call.end()
  })
}

const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

t.test('a static folder is served safely with a strict CSP', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'keygate-static-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  mkdirSync(join(folder, 'assets'))
  writeFileSync(join(folder, 'index.html'), '<!doctype html><title>app</title>')
  writeFileSync(join(folder, 'assets', 'app-abc123.js'), 'console.log(1)')
  writeFileSync(join(folder, 'assets', 'app-abc123.css'), 'body{}')
  // A secret beside the folder: no path may reach it.
  writeFileSync(join(folder, '..', 'keygate-static-secret.txt'), 'secret')
  t.teardown(() => rmSync(join(folder, '..', 'keygate-static-secret.txt'), { force: true }))
  const app: Plugin = { name: 'app', setup: () => [], staticFiles: () => ({ mount: '/app/', folder, missing: 'Error: not built.', generated: { 'settings.json': '{"basePath":"/v1.0"}' } }) }
  const service = await startService(t, { kind: 'sqlite', plugins: [app] })
  const { port } = service

  const index = await raw(port, 'GET', '/app/')
  t.equal(index.status, 200)
  t.equal(index.body, '<!doctype html><title>app</title>')
  t.equal(index.headers['content-type'], 'text/html; charset=utf-8')
  t.equal(index.headers['content-security-policy'], csp)
  t.equal(index.headers['x-content-type-options'], 'nosniff')
  t.equal(index.headers['referrer-policy'], 'no-referrer')
  t.equal(index.headers['cache-control'], 'no-cache')
  t.equal(index.headers['set-cookie'], undefined, 'no cookie, ever')

  const notModified = await raw(port, 'GET', '/app/', { 'if-none-match': String(index.headers.etag) })
  t.equal(notModified.status, 304)
  t.equal(notModified.body, '')
  for (const weak of [`W/${index.headers.etag}`, `"x", ${index.headers.etag}`, '*']) {
    t.equal((await raw(port, 'GET', '/app/', { 'if-none-match': weak })).status, 304, `If-None-Match: ${weak} (weak comparison)`)
  }

  const script = await raw(port, 'GET', '/app/assets/app-abc123.js')
  t.equal(script.headers['content-type'], 'text/javascript; charset=utf-8')
  t.equal(script.headers['cache-control'], 'public, max-age=31536000, immutable')
  t.equal((await raw(port, 'GET', '/app/assets/app-abc123.css')).headers['content-type'], 'text/css; charset=utf-8')
  t.same(JSON.parse((await raw(port, 'GET', '/app/settings.json')).body), { basePath: '/v1.0' })

  // A page of the app (SPA): index.html; a missing asset: 404.
  t.equal((await raw(port, 'GET', '/app/keys')).body, index.body)
  t.equal((await raw(port, 'GET', '/app/people/list?x=1')).body, index.body)
  t.equal((await raw(port, 'GET', '/app/assets/gone-123.js')).status, 404)
  const redirect = await raw(port, 'GET', '/app')
  t.equal(redirect.status, 301)
  t.equal(redirect.headers.location, '/app/')

  // Traversal, in every spelling: refused, and never the file beside the folder.
  for (const path of ['/app/../keygate-static-secret.txt', '/app/%2e%2e/keygate-static-secret.txt', '/app/assets/%2E%2E/%2E%2E/keygate-static-secret.txt',
    '/app/..%2fkeygate-static-secret.txt', '/app/..%5ckeygate-static-secret.txt', '/app/assets/..\\..\\keygate-static-secret.txt', '/app/%00', '/app/%zz']) {
    const answer = await raw(port, 'GET', path)
    t.ok(answer.status === 404 || answer.status === 400, `${path}: ${answer.status}`)
    t.notMatch(answer.body, /secret/, `${path}: not the file`)
    t.equal(answer.headers['content-security-policy'], csp, `${path}: CSP on errors too`)
  }

  // GET and HEAD only; HEAD without a body.
  const head = await raw(port, 'HEAD', '/app/')
  t.equal(head.status, 200)
  t.equal(head.body, '')
  const post = await raw(port, 'POST', '/app/')
  t.equal(post.status, 405)
  t.equal(post.headers.allow, 'GET, HEAD')

  // The API is untouched.
  t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200)
})

t.test('an unbuilt folder answers 503 with a clear text; console.enabled false removes the console', async (t) => {
  const missing: Plugin = { name: 'missing', setup: () => [], staticFiles: () => ({ mount: '/missing/', folder: join(tmpdir(), 'keygate-no-such-folder'), missing: 'Error: The app is not built.' }) }
  const service = await startService(t, { kind: 'sqlite', plugins: [missing] })
  const answer = await raw(service.port, 'GET', '/missing/')
  t.equal(answer.status, 503)
  t.equal(answer.body, 'Error: The app is not built.')
  t.equal(answer.headers['content-security-policy'], csp)

  const off = await startService(t, { kind: 'sqlite', config: { console: { enabled: false } } })
  t.equal((await raw(off.port, 'GET', '/console/')).status, 404, 'no console when disabled')
  const on = await startService(t, { kind: 'sqlite' })
  const page = await raw(on.port, 'GET', '/console/')
  t.ok(page.status === 200 || page.status === 503, 'the console is on by default (503 until built)')
  t.equal(page.headers['content-security-policy'], csp)
})

t.test('a base path that puts the API under the console is refused at start', async (t) => {
  // Refused before the database is made: no database, no root key to clean up after it.
  const dataDir = join(mkdtempSync(join(tmpdir(), 'keygate-buried-')), 'data')
  t.teardown(() => rmSync(dirname(dataDir), { recursive: true, force: true }))
  await t.rejects(startService(t, { kind: 'sqlite', config: { basePath: '/console', dataDir } }),
    { message: "invalid setting basePath: '/console' puts every route under /console/, where static files are served; choose another basePath" })
  t.notOk(existsSync(dataDir), 'nothing was written: no database, no admin-key.json')
  await t.rejects(startService(t, { kind: 'sqlite', config: { basePath: '/Console/v1' } }), { message: /^invalid setting basePath: '\/Console\/v1' puts every route under \/console\// }, 'routes match case-insensitively')
  // A mount that covers some routes only (here a plugin's own) is found once the routes are known.
  const shadowing: Plugin = {
    name: 'shadowing',
    setup: () => [{ method: 'GET', path: '/Files/Read/List', xml: { root: 'Files' }, handler: () => ({}) }],
    staticFiles: () => ({ mount: '/v1.0/files/', folder: join(tmpdir(), 'keygate-no-such-folder'), missing: 'Error: not built.' }),
  }
  await t.rejects(startService(t, { kind: 'sqlite', plugins: [shadowing] }),
    { message: /^invalid setting basePath: '\/v1\.0' puts GET \/v1\.0\/Files\/Read\/List \(plugin shadowing\) under \/v1\.0\/files\/, where static files are served; choose another basePath/ })
  const beside = await startService(t, { kind: 'sqlite', config: { basePath: '/consoles' } })
  t.equal((await beside.call('GET', '/Api/Read/Acl')).status, 200, 'a base path beside the mount is fine')
})
