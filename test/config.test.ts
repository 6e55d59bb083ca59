import t from 'tap'
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig, ConfigError } from '../kernel/boot/config.ts'

t.test('defaults, file, environment, in that order', async (t) => {
  const config = loadConfig({}, {})
  t.equal(config.host, '127.0.0.1')
  t.equal(config.port, 8080)
  t.equal(config.basePath, '/v1.0')
  t.equal(config.databaseUrl, null)
  t.same(config.plugins, ['keys', 'acl', 'log', 'people', 'api', 'account', 'webhooks'])
  t.equal(config.nodeId, null, 'node ids are claimed from the database unless configured')
  t.same(config.nodes, { heartbeatMs: 10000, expireMs: 30000 })
  t.equal(config.people.timeZone, 'UTC')
  t.equal(config.bodyLimit, 1048576)
  const folder = mkdtempSync(join(tmpdir(), 'keygate-config-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  const file = join(folder, 'config.json')
  writeFileSync(file, JSON.stringify({ port: 9000, plugins: ['acl'], log: { recordDays: 10 } }))
  const fromFile = loadConfig({}, { CONFIG_FILE: file })
  t.equal(fromFile.port, 9000)
  t.same(fromFile.plugins, ['acl'])
  t.equal(fromFile.log.recordDays, 10)
  t.equal(fromFile.log.detailDays, 7, 'nested defaults survive a partial section')
  const fromEnv = loadConfig({}, { CONFIG_FILE: file, PORT: '9100', PLUGINS: 'acl, keys', DATABASE_URL: 'mysql://u:p@db:3306/keygate' })
  t.equal(fromEnv.port, 9100, 'environment beats the file')
  t.same(fromEnv.plugins, ['acl', 'keys'])
  t.equal(fromEnv.databaseUrl, 'mysql://u:p@db:3306/keygate')
  t.same(config.database, { queryTimeoutMs: 10000 }, 'a silent database ends a call at 10 s by default')
  t.same(loadConfig({}, { DATABASE_QUERY_TIMEOUT_MS: '2500' }).database, { queryTimeoutMs: 2500 })
})

t.test('a bad setting names itself', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ PORT: 'eighty' }, /PORT must be a whole number, got 'eighty'/],
    [{ PORT: '70000' }, /invalid setting port: must be <= 65535 \(got 70000\)/],
    [{ DATABASE_URL: 'postgres://x' }, /invalid setting databaseUrl: must match pattern/],
    [{ PLUGINS: 'keys,Bad Name' }, /invalid setting plugins\.1/],
    [{ MASTER_KEY: 'short' }, /invalid setting masterKey/],
    [{ NODE_ID: '16' }, /invalid setting nodeId/],
    [{ BASE_PATH: 'v1' }, /invalid setting basePath/],
    [{ BASE_PATH: '/a/../b' }, /^invalid setting basePath: '\.' and '\.\.' segments are not allowed \(got "\/a\/\.\.\/b"\)$/],
    [{ BASE_PATH: '/v1/.' }, /^invalid setting basePath: '\.' and '\.\.' segments are not allowed/],
    [{ PEOPLE_TIME_ZONE: 'Mars/Olympus_Mons' }, /invalid setting people\.timeZone: not an IANA time zone \(got "Mars\/Olympus_Mons"\)/],
    [{ WEBHOOKS_ALLOW_ADDRESSES: '127.0.0.1, 10.0.0.0/33' }, /^invalid setting webhooks\.allowAddresses: not an IP address or CIDR range \(got "10\.0\.0\.0\/33"\)$/],
    [{ TRUST_PROXY: '127.0.0.1, 10.0.0.0/8' }, /^invalid setting trustProxy: not an IP address; list each proxy's address, ranges are not accepted \(got "10\.0\.0\.0\/8"\)$/],
    [{ TRUST_PROXY: 'proxy.internal' }, /^invalid setting trustProxy: .*\(got "proxy\.internal"\)$/],
    [{ WEBHOOKS_ALLOW_ADDRESSES: 'localhost' }, /^invalid setting webhooks\.allowAddresses: not an IP address or CIDR range \(got "localhost"\)$/],
    [{ WEBHOOKS_ALLOW_ADDRESSES: 'fd00::/8/1' }, /invalid setting webhooks\.allowAddresses: .*\(got "fd00::\/8\/1"\)/],
    [{ WEBHOOKS_MAX_PER_TENANT: '-1' }, /invalid setting webhooks\.maxPerTenant/],
    [{ DATABASE_QUERY_TIMEOUT_MS: '0' }, /^invalid setting database\.queryTimeoutMs: must be >= 100 \(got 0\)$/],
    [{ DATABASE_URL: 'mysql://u:S3CRET PW@h/x%' }, /^invalid setting databaseUrl: a %-escape in the user, password or database name is not valid \(write % itself as %25\) \(got "mysql:\/\/u:\*+@h\/x%"\)$/],
    [{ MASTER_KEY: '/nonexistent/keygate/master.key' }, /^invalid setting masterKey: the key file \/nonexistent\/keygate\/master\.key does not exist$/],
    [{ PORT: '9100', METRICS_PORT: '9100' }, /^invalid setting metrics\.port: the same port as the service's own \(9100\)$/],
  ]
  for (const [env, message] of cases) {
    let thrown: unknown
    try {
      loadConfig({}, env)
    } catch (error) {
      thrown = error
    }
    t.ok(thrown instanceof ConfigError, `${JSON.stringify(env)} is refused`)
    t.match((thrown as Error)?.message, message)
  }
  t.throws(() => loadConfig({ unknown: 1 } as never, {}), /unknown setting 'unknown'/)
  t.same(loadConfig({}, { TRUST_PROXY: '127.0.0.1, ::1, ::ffff:10.0.0.2, ::FFFF:10.0.0.3, 2001:DB8::1' }).trustProxy, ['127.0.0.1', '::1', '10.0.0.2', '10.0.0.3', '2001:db8::1'], 'proxy addresses pass, spelled as a peer address is compared (IPv4-mapped as plain IPv4, lower case)')
  t.same(loadConfig({}, { WEBHOOKS_ALLOW_ADDRESSES: '127.0.0.1, ::1, 10.0.0.0/8, fd00::/8' }).webhooks?.allowAddresses, ['127.0.0.1', '::1', '10.0.0.0/8', 'fd00::/8'], 'addresses and CIDR ranges pass')
  t.throws(() => loadConfig({ tls: { certFile: '/nonexistent/cert.pem', keyFile: '/nonexistent/key.pem' } }, {}), /^invalid setting tls\.certFile: the file \/nonexistent\/cert\.pem does not exist$/)
  t.throws(() => loadConfig({ nodes: { heartbeatMs: 30000, expireMs: 30000 } }, {}), /^invalid setting nodes\.heartbeatMs: must be less than nodes\.expireMs \(got 30000 >= 30000\)$/)
  t.throws(() => loadConfig({ timeouts: { headersMs: 10000, requestMs: 5000, keepAliveMs: 5000, maxHeaderSize: 16384 } }, {}), /^invalid setting timeouts\.headersMs: must be at most timeouts\.requestMs \(got 10000 > 5000\)$/)
  t.doesNotThrow(() => loadConfig({ timeouts: { headersMs: 5000, requestMs: 5000, keepAliveMs: 5000, maxHeaderSize: 16384 } }, {}), 'headersMs equal to requestMs is fine')
})

t.test('TLS files that cannot serve, and a database URL naming no database or a bad pool size, are refused at load naming the setting', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'keygate-config-tls-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  const certFile = join(folder, 'cert.pem')
  const keyFile = join(folder, 'key.pem')
  const otherKey = join(folder, 'other-key.pem')
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', '/CN=127.0.0.1'], { stdio: 'ignore' })
  execFileSync('openssl', ['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', otherKey], { stdio: 'ignore' })
  const garbage = join(folder, 'garbage.pem')
  writeFileSync(garbage, 'not a certificate\n')
  const directory = join(folder, 'certs')
  mkdirSync(directory)
  const tls = (files: object) => () => loadConfig({ tls: files } as never, {})
  // Before: these passed the existence check and failed after the migrations, as a fatal JSON line with a stack.
  t.throws(tls({ certFile: directory, keyFile }), /^invalid setting tls\.certFile: the file .*certs cannot be read \(EISDIR\)$/)
  t.throws(tls({ certFile, keyFile: directory }), /^invalid setting tls\.keyFile: the file .*certs cannot be read \(EISDIR\)$/)
  t.throws(tls({ certFile: garbage, keyFile }), /^invalid setting tls\.certFile: .*garbage\.pem does not hold a PEM certificate/)
  t.throws(tls({ certFile, keyFile: garbage }), /^invalid setting tls\.keyFile: .*garbage\.pem does not hold a PEM private key/)
  t.throws(tls({ certFile, keyFile: otherKey }), /^invalid setting tls\.keyFile: .*other-key\.pem is not the private key of .*cert\.pem/)
  t.throws(tls({ certFile }), /^invalid setting tls: must have required property 'keyFile'$/, 'a missing file is named, not "must be null"')
  t.doesNotThrow(tls({ certFile, keyFile }), 'a matching pair passes')
  t.throws(() => loadConfig({}, { DATABASE_URL: 'mysql://root@127.0.0.1:3306/' }), /^invalid setting databaseUrl: no database name \(mysql:\/\/user:pass@host:3306\/database\) \(got "mysql:\/\/root@127\.0\.0\.1:3306\/"\)$/)
  // connectionLimit=-1 made the start hang on the pool and exit 0 without a word; abc became NaN.
  for (const limit of ['-1', '0', 'abc', '2.5', '1001']) {
    t.throws(() => loadConfig({}, { DATABASE_URL: `mysql://root@db/keygate?connectionLimit=${limit}` }), new RegExp(`^invalid setting databaseUrl: connectionLimit must be a whole number from 1 to 1000 \\(got "mysql://root@db/keygate\\?connectionLimit=${limit.replace('.', '\\.')}"\\)$`), `connectionLimit=${limit}`)
  }
  t.throws(() => loadConfig({}, { DATABASE_URL: 'mysql://root@db/keygate?ssl=true' }), /^invalid setting databaseUrl: unknown parameter 'ssl' \(the only one is connectionLimit\)/)
  t.equal(loadConfig({}, { DATABASE_URL: 'mysql://root@db/keygate?connectionLimit=25' }).databaseUrl, 'mysql://root@db/keygate?connectionLimit=25')
  t.throws(() => loadConfig({}, { DATABASE_URL: 'mysql://u:secret@db' }), /^invalid setting databaseUrl: no database name .*\(got "mysql:\/\/u:\*\*\*@db"\)$/, 'the password is masked')
})

t.test('npm start with a bad setting stops with one line and a non-zero exit', async (t) => {
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env: { ...process.env, PORT: '-1' }, encoding: 'utf8', timeout: 30_000 })
  t.equal(result.status, 1)
  t.equal(result.stderr.trim().split('\n').length, 1)
  t.match(result.stderr, /^keygate: invalid setting port: must be >= 0/)
  const help = spawnSync(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts', '--help'], { encoding: 'utf8', timeout: 30_000 })
  t.equal(help.status, 0)
  t.match(help.stdout, /^usage: keygate \[--version\]/)
  const unknown = spawnSync(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts', '--verison'], { env: { ...process.env, PORT: '0' }, encoding: 'utf8', timeout: 30_000 })
  t.equal(unknown.status, 2, 'an unknown argument does not start the service with defaults')
  t.match(unknown.stderr, /^keygate: unknown argument '--verison'\nusage: keygate/)
  const badAddress = spawnSync(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env: { ...process.env, WEBHOOKS_ALLOW_ADDRESSES: '192.168.1.300' }, encoding: 'utf8', timeout: 30_000 })
  t.equal(badAddress.status, 1)
  t.equal(badAddress.stderr.trim().split('\n').length, 1)
  t.match(badAddress.stderr, /^keygate: invalid setting webhooks\.allowAddresses: not an IP address or CIDR range \(got "192\.168\.1\.300"\)/)
  // A key file that holds no key: one line naming the setting, no stack.
  const folder = mkdtempSync(join(tmpdir(), 'keygate-config-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  writeFileSync(join(folder, 'master.key'), 'not a key\n')
  const badKey = spawnSync(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env: { ...process.env, DATA_DIR: folder, MASTER_KEY: join(folder, 'master.key'), PORT: '0' }, encoding: 'utf8', timeout: 30_000 })
  t.equal(badKey.status, 1)
  t.equal(badKey.stderr, `keygate: invalid setting masterKey: ${join(folder, 'master.key')} does not hold a 64-hex-digit master key\n`)
})

t.test('a plugin that cannot be loaded or served stops the start with one line naming the setting', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'keygate-plugins-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  const start = (plugins: string) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'kernel/boot/main.ts'], { env: { ...process.env, DATA_DIR: join(folder, 'data'), PLUGINS: plugins, PORT: '0' }, encoding: 'utf8', timeout: 30_000 })
  const unknown = start('keys,nosuch')
  t.equal(unknown.status, 1)
  t.match(unknown.stderr, /^keygate: invalid setting plugins: plugin 'nosuch' is enabled in config but is neither a built-in plugin, a folder nor an installed npm package\n$/)
  t.notMatch(unknown.stdout, /"level":"fatal"/, 'no JSON stack trace')
  // A plugin written in JavaScript with default-group paths as plain strings, and one whose route has no xml.root.
  mkdirSync(join(folder, 'shape'))
  writeFileSync(join(folder, 'shape', 'index.mjs'), "export default { name: 'shape', defaultGroups: [{ name: 'Shape', paths: ['/Shape/Read'] }], setup: () => [] }\n")
  const shape = start(`keys,${join(folder, 'shape')}`)
  t.equal(shape.status, 1)
  t.equal(shape.stderr, `keygate: invalid setting plugins: plugin 'shape', default group 'Shape': each path is { path: '/...', displayName }, got "/Shape/Read"\n`)
  mkdirSync(join(folder, 'noroot'))
  writeFileSync(join(folder, 'noroot', 'index.mjs'), "export default { name: 'noroot', setup: () => [{ method: 'GET', path: '/Noroot/Read', handler: () => ({}) }] }\n")
  // A module that does not parse, and one with no plugin export: one line naming the folder, not a bare "Unexpected end of input" or a TypeError.
  mkdirSync(join(folder, 'broken'))
  writeFileSync(join(folder, 'broken', 'index.mjs'), "export default { name: \n")
  const broken = start(`keys,${join(folder, 'broken')}`)
  t.equal(broken.status, 1)
  t.match(broken.stderr, new RegExp(`^keygate: invalid setting plugins: plugin ${join(folder, 'broken')}: its entry ${join(folder, 'broken', 'index.mjs')} cannot be loaded: SyntaxError: [^\\n]+\\n$`))
  mkdirSync(join(folder, 'noexport'))
  writeFileSync(join(folder, 'noexport', 'index.mjs'), 'export const x = 1\n')
  const noExport = start(`keys,${join(folder, 'noexport')}`)
  t.equal(noExport.status, 1)
  t.equal(noExport.stderr, `keygate: invalid setting plugins: ${join(folder, 'noexport')} does not export a plugin (default export with a name and a setup function)\n`)
  const noRoot = start(`keys,${join(folder, 'noroot')}`)
  t.equal(noRoot.status, 1)
  t.match(noRoot.stderr, /^keygate: invalid setting plugins: GET \/Noroot\/Read of plugin noroot: xml\.root is required[^\n]*\n$/)
})
