/**
 * Issue 16 items 5 and 6: self-checking key strings (a typo is refused without a
 * database query, old-form keys still pass) and the WWW-Authenticate header on every 401.
 * On SQLite and MariaDB.
 */
import t from 'tap'
import type { CompiledQuery } from 'kysely'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { insertKey } from './helpers/keys.ts'
import { checkedKeyPattern, keyChecksum, plausibleApiKey } from '../kernel/auth/keyChecksum.ts'
import { newKeyCredentials } from '../kernel/auth/keyIssuer.ts'

const unknownKey = 'Error: Unknown or inactive API key.'
const challenge = 'KeygateHMAC realm="keygate", items="x-apikey x-apidate x-apihmac x-apitoday"'

/** Counts the statements that touch api_keys, by wrapping the kernel's query executor. */
function countKeyQueries(service: Service): { readonly count: number } {
  const executor = service.kernel.database.db.getExecutor()
  const original = executor.executeQuery.bind(executor)
  const counter = { count: 0 }
  executor.executeQuery = ((query: CompiledQuery) => {
    if (/api_keys/.test(query.sql)) counter.count++
    return original(query)
  }) as typeof executor.executeQuery
  return counter
}

/** One character of the key's random part changed. */
function typo(apiKey: string, at: number): string {
  const replacement = apiKey[at] === 'a' ? 'b' : 'a'
  return apiKey.slice(0, at) + replacement + apiKey.slice(at + 1)
}

t.test('the checksum arithmetic', async (t) => {
  for (let round = 0; round < 200; round++) {
    const { apiKey } = newKeyCredentials()
    t.match(apiKey, checkedKeyPattern)
    t.equal(apiKey.length, 31)
    t.ok(plausibleApiKey(apiKey))
    for (const at of [3, 15, 24, 25, 30]) t.notOk(plausibleApiKey(typo(apiKey, at)), `a typo at ${at} is caught`)
  }
  t.equal(keyChecksum('kg_0000000000000000000000').length, 6)
  t.ok(plausibleApiKey('kg_' + randomBytes(16).toString('base64url')), 'an old-form key is looked up')
  t.ok(plausibleApiKey('imported-key-of-another-system'), 'a key without our prefix is looked up')
  t.notOk(plausibleApiKey('kg_short'), 'a kg_ key of neither form')
  t.notOk(plausibleApiKey('kg_' + 'A'.repeat(27)), 'one character missing')
})

t.test('a secret never starts with -, which a CSV answer would quote with a leading apostrophe', async (t) => {
  // 1 in 64 base64url texts starts with -: 5,000 draws miss one only if the rule holds.
  const starts = new Set(Array.from({ length: 5000 }, () => newKeyCredentials().secret[0]))
  t.notOk(starts.has('-'), 'no secret starts with -')
  t.ok(starts.has('_') && starts.size > 60, 'the other 63 first characters all occur')
})

t.test("docs/keys.md's scanner patterns find every key, of either form, in text", async (t) => {
  const docs = readFileSync(new URL('../docs/keys.md', import.meta.url), 'utf8')
  const section = docs.slice(docs.indexOf('## Key strings and secret scanners'))
  const newer = new RegExp(/```\n(\\bkg_[^\n]+)\n```/.exec(section)![1])
  const older = new RegExp(/Older keys match\s+`([^`]+)`/.exec(section)![1])
  const legacy = (last: string) => `kg_${randomBytes(16).toString('base64url').slice(0, 21)}${last}`
  const olderKeys = ['-', '_', 'a', 'Z', '0'].map(legacy)
  const newerKeys = Array.from({ length: 50 }, () => newKeyCredentials().apiKey)
  for (const [pattern, keys, others] of [[newer, newerKeys, olderKeys], [older, olderKeys, newerKeys]] as const) {
    for (const key of keys) {
      for (const text of [key, `key="${key}"`, `KEY=${key}\n`, `(${key}) `]) t.ok(pattern.test(text), `${pattern} finds ${JSON.stringify(text)}`)
      t.notOk(pattern.test(`${key}A`), 'not inside a longer token')
    }
    for (const key of others) t.notOk(pattern.test(`"${key}"`), `${pattern} does not take the other form`)
  }
})

t.test('a typo is refused without a query; old-form keys keep working', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const fresh = await insertKey(service)
    t.match(fresh.apiKey, checkedKeyPattern, 'new keys carry a checksum')
    const queries = countKeyQueries(service)

    const first = await service.call('GET', '/Api/Read/Acl', { key: fresh })
    t.equal(first.status, 200)
    t.ok(queries.count > 0, 'an unloaded key is read from api_keys (the counter works)')

    for (const at of [3, 10, 20, 26, 30]) {
      const before = queries.count
      const wrong = await service.call('GET', '/Api/Read/Acl', { key: { apiKey: typo(fresh.apiKey, at), secret: fresh.secret } })
      t.equal(wrong.status, 401, `typo at ${at}: 401`)
      t.equal(wrong.text, unknownKey, 'the text of an unknown key')
      t.equal(wrong.headers.get('www-authenticate'), challenge)
      t.equal(queries.count, before, `typo at ${at}: no api_keys query`)
    }
    // A well-formed key nobody holds is looked up (and is unknown): the same answer.
    const before = queries.count
    const stranger = newKeyCredentials()
    const unknown = await service.call('GET', '/Api/Read/Acl', { key: stranger })
    t.equal(unknown.status, 401)
    t.equal(unknown.text, unknownKey)
    t.ok(queries.count > before, 'a key with a right checksum is looked up')

    // A key of the older form (kg_ + 22 base64url, no checksum), as issued before.
    const legacy = await insertKey(service)
    const legacyApiKey = 'kg_' + randomBytes(16).toString('base64url')
    await service.kernel.database.db.updateTable('api_keys')
      .set({ api_key: legacyApiKey, secret_enc: service.kernel.secrets.seal(legacy.secret, legacyApiKey) })
      .where('id', '=', legacy.id).execute()
    const old = await service.call('GET', '/Api/Read/Acl', { key: { apiKey: legacyApiKey, secret: legacy.secret } })
    t.equal(old.status, 200, 'an old-form key still passes')
  }),
)

t.test('every 401 says how to authenticate; other answers do not', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const url = `${service.base}/Api/Read/Acl`
    const refusals: [string, Promise<{ status: number; headers: Headers; text: string }>][] = [
      ['no credentials on a key-only path', fetch(url).then(async (r) => ({ status: r.status, headers: r.headers, text: await r.text() }))],
      ['a date without a key', fetch(url, { headers: { 'x-apidate': new Date().toUTCString() } }).then(async (r) => ({ status: r.status, headers: r.headers, text: await r.text() }))],
      ['an unknown key', service.call('GET', '/Api/Read/Acl', { key: newKeyCredentials() })],
      ['a wrong signature', service.call('GET', '/Api/Read/Acl', { key: { apiKey: service.admin.apiKey, secret: 'wrong' } })],
      ['a missing day code', service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'x', GroupId: 1 } })],
    ]
    for (const [name, pending] of refusals) {
      const answer = await pending
      t.equal(answer.status, 401, name)
      t.match(answer.text, /^Error: /, name)
      t.equal(answer.headers.get('www-authenticate'), challenge, name)
    }
    const ok = await service.call('GET', '/Api/Read/Acl')
    t.equal(ok.status, 200)
    t.equal(ok.headers.get('www-authenticate'), null, 'no challenge on 200')
    const bad = await service.call('POST', '/Api/Rotate/Key', { body: {}, today: true })
    t.equal(bad.status, 400)
    t.equal(bad.headers.get('www-authenticate'), null, 'no challenge on 400')
    // The change history says so, as a change of every operation.
    const changes = (await service.call('GET', '/Api/Read/Changes')).json as { Operation: string; Description: string }[]
    t.ok(changes.some((entry) => entry.Description.startsWith('For every operation:') && entry.Description.includes(`WWW-Authenticate: ${challenge}`)), 'a change-history entry for the header')
  }),
)
