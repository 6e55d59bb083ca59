/**
 * Issue 14.7: `npm run call` finds the service the way the service configures itself
 * (PORT, DATA_DIR, BASE_PATH, CONFIG_FILE), ends quietly when its reader goes away
 * (`| head`), and refuses an empty KEYGATE_API_KEY/SECRET instead of using the root key.
 * An image answer is written byte for byte to stdout, its status and headers to stderr.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startService } from './helpers/service.ts'

function call(args: string[], env: Record<string, string | undefined>) {
  const childEnv: Record<string, string | undefined> = { ...process.env, DATABASE_URL: undefined, PORT: undefined, DATA_DIR: undefined, BASE_PATH: undefined, CONFIG_FILE: undefined, KEYGATE_API_KEY: undefined, KEYGATE_API_SECRET: undefined, ...env }
  for (const name of Object.keys(childEnv)) if (childEnv[name] === undefined) delete childEnv[name]
  return run(process.execPath, ['--import', 'tsx', 'scripts/call.ts', ...args], childEnv as NodeJS.ProcessEnv)
}

/** A child process, awaited (never spawnSync: the service under test runs in this process). */
function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string; bytes: Buffer }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
    const chunks: Buffer[] = []
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (status) => {
      const bytes = Buffer.concat(chunks)
      resolve({ status, stdout: bytes.toString('utf8'), stderr, bytes })
    })
  })
}

t.test('the signing client reads PORT, DATA_DIR and a config file like the service', async (t) => {
  const service = await startService(t, { kind: 'sqlite', config: { basePath: '/gateway' } })
  const byEnvironment = await call(['GET', '/Api/Read/Acl?format=json'], { PORT: String(service.port), DATA_DIR: service.config.dataDir, BASE_PATH: '/gateway' })
  t.equal(byEnvironment.status, 0, byEnvironment.stderr)
  t.match(byEnvironment.stdout, /^HTTP 200 OK\n/)
  t.match(byEnvironment.stdout, /"Path":"\/Api\/Read\/Acl"/)

  const folder = mkdtempSync(join(tmpdir(), 'keygate-call-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  const configFile = join(folder, 'keygate.json')
  writeFileSync(configFile, JSON.stringify({ port: service.port, basePath: '/gateway', dataDir: service.config.dataDir }))
  const byFile = await call(['GET', '/Api/Read/Acl?format=json'], { CONFIG_FILE: configFile })
  t.equal(byFile.status, 0, byFile.stderr)
  t.match(byFile.stdout, /^HTTP 200 OK\n/)

  const wrongPlace = await call(['GET', '/Api/Read/Acl'], { PORT: String(service.port), DATA_DIR: service.config.dataDir })
  t.equal(wrongPlace.status, 1, 'without the base path the service answers 404')
  t.match(wrongPlace.stdout, /^HTTP 404 Not Found\n/)

  const bad = await call(['GET', '/Api/Read/Acl'], { PORT: 'eighty' })
  t.equal(bad.status, 2)
  t.equal(bad.stderr, "call: PORT must be a whole number, got 'eighty'\n")
})

t.test('a closed stdout (| head) ends the client quietly', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  // `true` exits at once: every write of the client meets a closed pipe (EPIPE).
  const piped = await run('bash', ['-c', `"${process.execPath}" --import tsx scripts/call.ts GET /Api/Read/Acl | true; echo "exit=\${PIPESTATUS[0]}" >&2`],
    { ...process.env, PORT: String(service.port), DATA_DIR: service.config.dataDir, DATABASE_URL: '' })
  t.equal(piped.stderr, 'exit=0\n', 'no stack trace, exit 0')
})

t.test('an empty KEYGATE_API_KEY or KEYGATE_API_SECRET is an error, never the root key', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const env = { PORT: String(service.port), DATA_DIR: service.config.dataDir }
  const emptyKey = await call(['GET', '/Api/Read/Acl'], { ...env, KEYGATE_API_KEY: '', KEYGATE_API_SECRET: service.admin.secret })
  t.equal(emptyKey.status, 2)
  t.equal(emptyKey.stderr, 'Error: KEYGATE_API_KEY is set but empty\n')
  t.equal(emptyKey.stdout, '', 'no call was made')
  const emptySecret = await call(['GET', '/Api/Read/Acl'], { ...env, KEYGATE_API_KEY: service.admin.apiKey, KEYGATE_API_SECRET: '' })
  t.equal(emptySecret.status, 2)
  t.equal(emptySecret.stderr, 'Error: KEYGATE_API_SECRET is set but empty\n')
  const half = await call(['GET', '/Api/Read/Acl'], { ...env, KEYGATE_API_KEY: service.admin.apiKey })
  t.equal(half.status, 2)
  t.equal(half.stderr, 'Error: set both KEYGATE_API_KEY and KEYGATE_API_SECRET, or neither\n')
  const both = await call(['GET', '/Api/Read/Acl?format=json'], { ...env, KEYGATE_API_KEY: service.admin.apiKey, KEYGATE_API_SECRET: service.admin.secret })
  t.equal(both.status, 0, both.stderr)
  t.match(both.stdout, /^HTTP 200 OK\n/)
})

t.test('an image answer is written byte for byte (> photo.png), its status and headers on stderr', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const person = (await service.call('POST', '/People/Update/OneChange', { body: { Source_Id: 'P1', FirstName: 'Pat', LastName: 'Doe' } })).json
  // A PNG with every byte value after its header: a text decoding would change it.
  const image = Buffer.concat([Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64'), Buffer.from(Array.from({ length: 256 }, (_, index) => index))])
  const stored = await service.call('POST', '/People/Update/OnePhoto', { body: { Id: person.Id, Image: image.toString('base64') } })
  t.equal(stored.status, 200, stored.text)
  const fetched = await call(['GET', `/People/Read/Photo?Id=${person.Id}`], { PORT: String(service.port), DATA_DIR: service.config.dataDir })
  t.equal(fetched.status, 0, fetched.stderr)
  t.ok(fetched.bytes.equals(image), 'the stored bytes, unchanged')
  t.match(fetched.stderr, /^HTTP 200 OK\n(.*\n)*content-type: image\/png\n/)
})
