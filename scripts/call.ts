/**
 * A signing client: `npm run --silent call -- METHOD PATH [--body JSON] [--today CODE]
 * [--key-file F] [--base URL] [--header 'Name: value']...`. Signs with the kernel's own
 * code (D4) and prints status, headers and body. PATH is after the base path, e.g.
 * /Api/Read/Acl or '/People/Read/Missing?page=2'. The key comes from --key-file
 * (default <DATA_DIR>/admin-key.json) or KEYGATE_API_KEY + KEYGATE_API_SECRET;
 * --public sends no credentials at all (Is_Public paths such as /Api/Read/Changes).
 * `--field NAME[,NAME]` prints only those fields of the JSON answer (`Id`, `0.Id` for a
 * list's first record), on one line and `--request-id` only the x-RequestID header, for scripts:
 * `ID=$(npm run --silent call -- POST ... --field Id)`; a status other than 2xx then
 * prints the answer to stderr and exits 1.
 * It finds the service the way the service configures itself (loadConfig: PORT, HOST,
 * BASE_PATH, DATA_DIR, CONFIG_FILE or config/local.json).
 */
import { parseArgs } from 'node:util'
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { signedHeaders } from '../kernel/auth/signature.ts'
import { loadConfig, ConfigError, type Config } from '../kernel/boot/config.ts'
import { exitQuietlyOnClosedPipe } from './closedPipe.ts'

const usage = `usage: npm run --silent call -- METHOD PATH [--body JSON] [--today CODE] [--key-file FILE] [--base URL] [--header 'Name: value']... [--field NAME[,NAME] | --request-id] [--public]`

function fail(message: string): never {
  console.error(`call: ${message}`)
  process.exit(2)
}

/** A wrong environment: the plain `Error: ...` line, exit 2. */
function refuse(message: string): never {
  console.error(`Error: ${message}`)
  process.exit(2)
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    body: { type: 'string' }, today: { type: 'string' }, 'key-file': { type: 'string' }, base: { type: 'string' },
    header: { type: 'string', multiple: true }, help: { type: 'boolean', short: 'h' }, public: { type: 'boolean' },
    field: { type: 'string' }, 'request-id': { type: 'boolean' },
  },
})
if (values.help || positionals.length !== 2) fail(usage)
const [method, path] = [positionals[0].toUpperCase(), positionals[1]]
if (!path.startsWith('/')) fail('PATH starts with / and comes after the base path, e.g. /Api/Read/Acl')
// Each prints the one line a script reads: both at once would drop one without a word.
if (values.field !== undefined && values['request-id']) fail('--field and --request-id each print the one thing asked for: give only one of them')

exitQuietlyOnClosedPipe('call')
let config: Config
try {
  config = loadConfig()
} catch (error) {
  fail(error instanceof ConfigError ? error.message : (error as Error).message)
}
// Set but empty is a mistake (an unset variable in a script): never fall back to the root key.
for (const name of ['KEYGATE_API_KEY', 'KEYGATE_API_SECRET']) {
  if (process.env[name] !== undefined && process.env[name]!.trim() === '') refuse(`${name} is set but empty`)
}
const { KEYGATE_API_KEY: envKey, KEYGATE_API_SECRET: envSecret } = process.env
if ((envKey === undefined) !== (envSecret === undefined)) refuse('set both KEYGATE_API_KEY and KEYGATE_API_SECRET, or neither')
let key: { apiKey: string; secret: string } | null = null
if (values.public) {
  // Is_Public paths (/Api/Read/Changes, ...) take no credentials at all.
  if (values['key-file'] || values.today) fail('--public sends no credentials: leave out --key-file and --today')
} else if (envKey !== undefined && envSecret !== undefined && !values['key-file']) {
  key = { apiKey: envKey, secret: envSecret }
} else {
  const file = resolve(values['key-file'] ?? join(config.dataDir, 'admin-key.json'))
  try {
    const stored = JSON.parse(readFileSync(file, 'utf8'))
    key = { apiKey: stored.Api_Key, secret: stored.Api_Secret }
  } catch (error) {
    fail(`cannot read the key file ${file}: ${(error as Error).message}`)
  }
}
if (values.body !== undefined) {
  try {
    JSON.parse(values.body)
  } catch {
    fail('--body is not valid JSON')
  }
}
// A service listening on every address is reached on this host's loopback.
const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host
const base = values.base ?? `${config.tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${config.port}${config.basePath}`
/** Answers printed as text with their status and headers; anything else is written as bytes. */
const textual = /^(text\/|application\/(json|xml|rss\+xml|javascript)|image\/svg\+xml)/i

const headers: Record<string, string> = key === null ? {} : signedHeaders(key, method, path, values.body, { today: values.today })
if (values.body !== undefined) headers['content-type'] = 'application/json'
for (const line of values.header ?? []) {
  const colon = line.indexOf(':')
  if (colon < 1) fail(`--header '${line}' is not 'Name: value'`)
  headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim()
}
try {
  const response = await fetch(base + path, { method, headers, body: values.body })
  if (values.field !== undefined || values['request-id']) {
    const text = await response.text()
    if (!response.ok) {
      console.error(`call: HTTP ${response.status} ${response.statusText}: ${text}`)
      process.exit(1)
    }
    // Several fields (`Id,Api_Key`) print on one line, for `read -r ID KEY`.
    console.log(values['request-id'] ? response.headers.get('x-requestid') ?? '' : values.field!.split(',').map((name) => fieldOf(text, name)).join(' '))
    process.exit(0)
  }
  const type = response.headers.get('content-type') ?? ''
  if (type !== '' && !textual.test(type)) {
    // An image (GET /People/Read/Photo): the bytes as they came on stdout (`> photo.jpg`), the status and headers on stderr.
    console.error(`HTTP ${response.status} ${response.statusText}`)
    for (const [name, value] of response.headers) console.error(`${name}: ${value}`)
    process.stdout.write(Buffer.from(await response.arrayBuffer()))
    process.exitCode = response.ok ? 0 : 1
  } else {
    console.log(`HTTP ${response.status} ${response.statusText}`)
    for (const [name, value] of response.headers) console.log(`${name}: ${value}`)
    console.log('')
    console.log(await response.text())
    process.exitCode = response.ok ? 0 : 1
  }
} catch (error) {
  fail(`cannot reach ${base}: ${(error as Error & { cause?: Error }).cause?.message ?? (error as Error).message}`)
}

/** One field of a JSON answer by a dotted path (`Id`, `0.Id`); objects print as JSON. */
function fieldOf(text: string, name: string): string {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    fail(`--field ${name}: the answer is not JSON (ask with ?format=json)`)
  }
  for (const part of name.split('.')) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, part)) fail(`--field ${name}: the answer has no such field`)
    value = (value as Record<string, unknown>)[part]
  }
  return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value)
}
