import type { Kysely, Selectable, Transaction } from 'kysely'
import type { CoreTables } from '../../kernel/storage/coreTables.ts'
import type { Dialect } from '../../kernel/storage/database.ts'

export type KeyRow = Selectable<CoreTables['api_keys']>

/** The id of the key with this Api_Key value, whoever owns it (only compared, never shown). */
export async function keyIdByApiKey(db: Kysely<CoreTables>, apiKey: string): Promise<number | undefined> {
  const row = await db.selectFrom('api_keys').select('id').where('api_key', '=', apiKey).executeTakeFirst()
  return row === undefined ? undefined : Number(row.id)
}

/**
 * A key the caller may edit (interface 4.2, D9): one its own key created, never the
 * caller itself. Locked for the rest of the transaction on MySQL, so two edits of one
 * key apply one after the other (SQLite runs one transaction at a time anyway and has
 * no FOR UPDATE).
 */
export function editableKey(trx: Transaction<CoreTables>, dialect: Dialect, keyId: number, callerKeyId: number): Promise<KeyRow | undefined> {
  return trx
    .selectFrom('api_keys')
    .selectAll()
    .where('id', '=', keyId)
    .where('created_by', '=', callerKeyId)
    .where('id', '<>', callerKeyId)
    .$if(dialect === 'mysql', (query) => query.forUpdate())
    .executeTakeFirst()
}

/** Replaces a key's group assignment (inside the edit's transaction). */
export async function replaceKeyGroups(trx: Transaction<CoreTables>, keyId: number, groupIds: readonly number[]): Promise<void> {
  await trx.deleteFrom('api_key_groups').where('key_id', '=', keyId).execute()
  await trx.insertInto('api_key_groups').values(groupIds.map((groupId) => ({ key_id: keyId, group_id: groupId }))).execute()
}

/** The keys a key created, oldest first, with the groups each holds. */
export async function keysCreatedBy(db: Kysely<CoreTables>, creatorKeyId: number): Promise<{ keys: KeyRow[]; groups: Map<number, { Id: number; Display_Name: string }[]> }> {
  const [keys, groupRows] = await Promise.all([
    db.selectFrom('api_keys').selectAll().where('created_by', '=', creatorKeyId).orderBy('id').execute(),
    db
      .selectFrom('api_key_groups as kg')
      .innerJoin('api_keys as k', 'k.id', 'kg.key_id')
      .innerJoin('api_groups as g', 'g.id', 'kg.group_id')
      .select(['kg.key_id as keyId', 'g.id as groupId', 'g.display_name as groupName'])
      .where('k.created_by', '=', creatorKeyId)
      .orderBy('kg.key_id')
      .orderBy('g.id')
      .execute(),
  ])
  const groups = new Map<number, { Id: number; Display_Name: string }[]>()
  for (const row of groupRows) {
    const keyId = Number(row.keyId)
    const list = groups.get(keyId) ?? []
    list.push({ Id: Number(row.groupId), Display_Name: row.groupName })
    groups.set(keyId, list)
  }
  return { keys, groups }
}
