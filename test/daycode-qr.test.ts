/**
 * `admin daycode --uri` (issue 18): stdout is the otpauth URI alone, as before, so
 * scripts still read it; the QR code for an authenticator app goes to stderr.
 */
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { runAdmin } from './helpers/adminCli.ts'

t.test('daycode --uri prints the URI on stdout and its QR code on stderr', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-qr-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const result = await runAdmin(['daycode', '--uri'], { DATA_DIR: dataDir })
  t.equal(result.code, 0)
  t.match(result.stdout, /^otpauth:\/\/totp\/[^\n]+digits=8&period=14400\n$/)
  t.match(result.stderr, /▄|█/, 'a QR code drawn with block characters')
  t.match(result.stderr, /Scan with an authenticator app/)
  t.notMatch(result.stderr, /otpauth:/, 'the URI itself is not repeated on stderr')
})
