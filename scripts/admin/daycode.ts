import { dayCodeAt, dayCodeUri } from '../../kernel/auth/dayCode.ts'
import type { AdminCommand } from './command.ts'

/** `daycode [--uri]`: the current day code of the database this config points at (D5). */
export const daycode: AdminCommand = {
  usage: '  daycode [--uri]                                   the current day code (x-apitoday)',
  options: { uri: { type: 'boolean' } },
  async run(session, _words, options) {
    const kernel = await session.kernel()
    return options.uri ? dayCodeUri(kernel.daySecret, 'keygate') : dayCodeAt(kernel.daySecret, Date.now())
  },
}
