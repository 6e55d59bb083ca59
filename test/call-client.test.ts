/**
 * `npm run call` (scripts/call.ts) with the api plugin's operations: signed with the
 * key file of the data folder, and with --public for the Is_Public paths. The client
 * never touches the database, so SQLite is enough here.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { startService } from './helpers/service.ts'

const run = promisify(execFile)

async function callClient(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'scripts/call.ts', ...args], { env: { ...process.env, ...env }, maxBuffer: 16 * 1024 * 1024 })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string }
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr }
  }
}

t.test('npm run call: every api operation, signed and (where public) without credentials', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const env = { DATA_DIR: service.config.dataDir }
  const base = service.base

  const list = await callClient(env, 'GET', '/api/read/list', '--base', base)
  t.equal(list.code, 0, list.stderr)
  t.match(list.stdout, /^HTTP 200 OK\n/)
  const body = JSON.parse(list.stdout.slice(list.stdout.indexOf('\n\n') + 2))
  t.ok(body.some((entry: { Path: string }) => entry.Path === '/Api/Read/List'), 'the list, signed with the root key of the data folder')

  const refused = await callClient(env, 'GET', '/Api/Read/List', '--base', base, '--public')
  t.equal(refused.code, 1)
  t.match(refused.stdout, /^HTTP 401 Unauthorized\n[\s\S]*\nError: Missing credentials/, 'the list is not public')

  const expected: [string, RegExp][] = [
    ['/Api/Read/Changes?format=xml', /content-type: application\/xml/],
    ['/Api/Read/Changes/Rss', /content-type: application\/rss\+xml/],
    ['/Api/Read/OpenApi', /"openapi":"3\.1\.0"/],
    ['/Api/Read/Reference', /content-type: text\/html/],
    ['/Api/Read/Reference/reference.js', /SwaggerUIBundle/],
    ['/Api/Read/Reference/swagger-ui.css', /content-type: text\/css/],
  ]
  for (const [path, shows] of expected) {
    // Each public path without credentials; two of them signed as well (a signed call to a public path works too).
    for (const mode of path.startsWith('/Api/Read/Reference') ? ['public' as const] : ['signed' as const, 'public' as const]) {
      const answer = await callClient(env, 'GET', path, '--base', base, ...(mode === 'public' ? ['--public'] : []))
      t.equal(answer.code, 0, `${mode} ${path}: ${answer.stderr}`)
      t.match(answer.stdout, /^HTTP 200 OK\n/, `${mode} ${path}`)
      t.match(answer.stdout, shows, `${mode} ${path}`)
      t.equal(/x-requestid/.test(answer.stdout), true, 'logged like any call')
    }
  }
  const misuse = await callClient(env, 'GET', '/Api/Read/Changes', '--public', '--today', '12345678')
  t.equal(misuse.code, 2)
  t.equal(misuse.stderr, 'call: --public sends no credentials: leave out --key-file and --today\n')

  // README: --field prints fields, --request-id the request id; asked for both, one was dropped without a word.
  const both = await callClient(env, 'GET', '/Api/Read/Acl', '--base', base, '--field', '0.Path', '--request-id')
  t.equal(both.code, 2)
  t.equal(both.stdout, '', 'no call was made')
  t.equal(both.stderr, 'call: --field and --request-id each print the one thing asked for: give only one of them\n')
  const first = await callClient(env, 'GET', '/Api/Read/Acl', '--base', base, '--field', '0.Path')
  t.equal(first.stdout, '/Api/Create/Key\n', '--field 0.Path: a field of a list\'s first record')
})
