import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { recordChange } from '../../kernel/audit/auditTrail.ts'
import { readSetting } from '../../kernel/boot/bootstrap.ts'
import { newKeyCredentials } from '../../kernel/auth/keyIssuer.ts'
import { UsageError, serviceSeesIt, type AdminCommand } from './command.ts'

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
    // A reset also ends a rotation's previous secret (issue 16): no old secret survives it. Audited as an operator change.
    const now = Date.now()
    await db.transaction().execute(async (trx) => {
      const before = await trx.selectFrom('api_keys').select(['parent', 'custno']).where('id', '=', Number(row.id)).executeTakeFirstOrThrow()
      await trx.updateTable('api_keys').set({ secret_enc: kernel.secrets.seal(secret, row.api_key), prev_secret_enc: null, prev_secret_ends: null, updated_at: now }).where('id', '=', Number(row.id)).execute()
      await recordChange(trx, now, { who: null, parent: Number(before.parent), custno: Number(before.custno), action: 'key.reset', keyId: Number(row.id) })
    })
    kernel.services.keys.changed(Number(row.id))
    console.error(`admin: the old secret stops working; ${serviceSeesIt(kernel)}`)
    // Never rewritten (D10), but the signing client reads it by default: say it is stale.
    for (const file of keyFilesOf(session.config.dataDir, row.api_key)) {
      console.error(`admin: ${file} still holds the old secret (npm run call signs with it by default): replace its Api_Secret with the new one, or remove it`)
    }
    return { Id: Number(row.id), Api_Key: row.api_key, Api_Secret: secret }
  },
}

/** The data folder's admin-key*.json files that hold this Api_Key. */
function keyFilesOf(dataDir: string, apiKey: string): string[] {
  let names: string[]
  try {
    names = readdirSync(dataDir).filter((name) => /^admin-key(-\d+)?\.json$/.test(name))
  } catch {
    return []
  }
  return names.map((name) => join(dataDir, name)).filter((file) => {
    try {
      return (JSON.parse(readFileSync(file, 'utf8')) as { Api_Key?: unknown }).Api_Key === apiKey
    } catch {
      return false
    }
  })
}
