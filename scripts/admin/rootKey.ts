import { readSetting } from '../../kernel/boot/bootstrap.ts'
import { newKeyCredentials } from '../../kernel/auth/keyIssuer.ts'
import { UsageError, type AdminCommand } from './command.ts'

/**
 * `root-key`: a new secret for the root admin key when its secret is lost. The Api_Key,
 * its groups and its log stay; the old secret stops working. Printed once, written nowhere.
 */
export const rootKey: AdminCommand = {
  usage: '  root-key                                          a new secret for the root admin key (printed once)',
  async run(session, words) {
    if (words.length > 0) throw new UsageError('usage: root-key')
    const kernel = await session.kernel()
    const { db } = kernel.database
    const rootId = await readSetting(db, 'root_key_id')
    const row = rootId === undefined ? undefined : await db.selectFrom('api_keys').select(['id', 'api_key']).where('id', '=', Number(rootId)).executeTakeFirst()
    if (!row) throw new Error('this database has no root admin key (root_key_id names none)')
    const { secret } = newKeyCredentials()
    await db.updateTable('api_keys').set({ secret_enc: kernel.secrets.seal(secret, row.api_key), updated_at: Date.now() }).where('id', '=', Number(row.id)).execute()
    kernel.services.keys.changed(Number(row.id))
    console.error(`admin: the old secret stops working; a running service sees this within cache.keyTtlSeconds (${kernel.config.cache.keyTtlSeconds} s)`)
    return { Id: Number(row.id), Api_Key: row.api_key, Api_Secret: secret }
  },
}
