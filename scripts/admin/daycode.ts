import QRCode from 'qrcode'
import { dayCodeAt, dayCodeUri } from '../../kernel/auth/dayCode.ts'
import { noMoreWords, type AdminCommand } from './command.ts'

/**
 * `daycode [--uri]`: the current day code of the database this config points at (D5).
 * With --uri, stdout is the otpauth:// URI alone (parseable as before) and stderr shows
 * it as a QR code for an authenticator app: once, to the operator at the terminal, never
 * in the browser console.
 */
export const daycode: AdminCommand = {
  usage: '  daycode [--uri]                                   the current day code (x-apitoday); --uri: otpauth URI, QR code on stderr',
  options: { uri: { type: 'boolean' } },
  async run(session, words, options) {
    noMoreWords(words, 0, 'daycode')
    const kernel = await session.kernel()
    if (!options.uri) return dayCodeAt(kernel.daySecret, Date.now())
    const uri = dayCodeUri(kernel.daySecret, 'keygate')
    process.stderr.write(`${await QRCode.toString(uri, { type: 'terminal', small: true })}\nScan with an authenticator app (8 digits, 4-hour period); keep it private.\n`)
    return uri
  },
}
