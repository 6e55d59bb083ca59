import { randomBytes } from 'node:crypto'
import type { Kysely, Insertable } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import type { SecretBox } from './secrets.ts'
import { newCheckedApiKey } from './keyChecksum.ts'

/** Prefix that makes our keys recognisable (secret scanners, logs) - D9. */
export const apiKeyPrefix = 'kg_'

export interface NewKeyCredentials {
  apiKey: string
  secret: string
}

/**
 * 256 random bits as base64url, drawn again when the text starts with `-` (1 in 64):
 * a CSV answer quotes a cell starting `-` with `'` against spreadsheet formulas (OWASP),
 * which would hand a CSV client a secret that does not sign.
 */
function newSecret(): string {
  for (;;) {
    const secret = randomBytes(32).toString('base64url')
    if (secret[0] !== '-') return secret
  }
}

/** 128 random bits of key (with its checksum, keyChecksum.ts) and 256 of secret, from crypto.randomBytes (D9). */
export function newKeyCredentials(): NewKeyCredentials {
  return { apiKey: newCheckedApiKey(apiKeyPrefix), secret: newSecret() }
}

export type KeyFields = Omit<Insertable<CoreTables['api_keys']>, 'id' | 'api_key' | 'secret_enc' | 'created_at' | 'updated_at'>

export interface IssuedKey {
  id: number
  apiKey: string
  secret: string
}

/** Work done inside the key's transaction: a check first (a tenant limit), a row that belongs to the key after. */
export interface IssueSteps {
  before?(trx: Kysely<CoreTables>): Promise<void>
  after?(trx: Kysely<CoreTables>, keyId: number): Promise<void>
}

/**
 * Writes a new key and its group assignment in one transaction, the secret sealed
 * under the master key. Used by first start, the admin CLI and the keys plugin, so
 * every key is made the same way. A taken Display_Name surfaces as the database's
 * unique violation (see isUniqueViolation); nothing is half-written then.
 */
export async function issueKey(
  db: Kysely<CoreTables>,
  secrets: SecretBox,
  now: number,
  fields: KeyFields,
  groupIds: readonly number[],
  steps: IssueSteps = {},
): Promise<IssuedKey> {
  const credentials = newKeyCredentials()
  const id = await db.transaction().execute(async (trx) => {
    await steps.before?.(trx)
    const inserted = await trx
      .insertInto('api_keys')
      .values({
        ...fields,
        api_key: credentials.apiKey,
        secret_enc: secrets.seal(credentials.secret, credentials.apiKey),
        created_at: now,
        updated_at: now,
      })
      .executeTakeFirstOrThrow()
    const keyId = Number(inserted.insertId)
    if (groupIds.length > 0) {
      await trx.insertInto('api_key_groups').values(groupIds.map((groupId) => ({ key_id: keyId, group_id: groupId }))).execute()
    }
    await steps.after?.(trx, keyId)
    return keyId
  })
  return { id, ...credentials }
}
