import type { Call, KernelServices } from '../../kernel/plugin.ts'
import { isUniqueViolation, retryOnDeadlock } from '../../kernel/storage/database.ts'
import { badRequest, notFound } from '../../kernel/errors.ts'
import type { EditKeyBody } from './schemas.ts'
import { keyColumns, nameTaken } from './keyInput.ts'
import { resolveTenant } from './tenantScope.ts'
import { checkedGroupIds } from './groupRules.ts'
import { editableKey, keyIdByApiKey, replaceKeyGroups } from './keyQueries.ts'
import { keyAnswer, type KeyAnswer } from './keyAnswer.ts'

// One text for "no such key" and "not yours" (interface 4.2, D6): no key's existence leaks.
const keyNotFound = () => notFound('Key not found.')

/**
 * The key an edit names (interface 4.2): KeyId and/or ApiKey; both given must name
 * the same key. Comparing against ApiKey's owner leaks nothing: the answer depends
 * only on whether the caller already holds that Api_Key value.
 */
async function namedKeyId(kernel: KernelServices, body: EditKeyBody): Promise<number> {
  if (body.KeyId === undefined && body.ApiKey === undefined) throw badRequest('KeyId or ApiKey is required.')
  if (body.ApiKey === undefined) return body.KeyId!
  const byApiKey = await keyIdByApiKey(kernel.db, body.ApiKey)
  if (body.KeyId !== undefined && byApiKey !== body.KeyId) throw badRequest('KeyId and ApiKey do not name the same key.')
  if (byApiKey === undefined) throw keyNotFound()
  return byApiKey
}

/**
 * POST /Api/Edit/Key (interface 4.2): changes only the given fields, all or nothing in
 * one transaction; then the key's cached auth record and cached answers are dropped,
 * so the change (a group less, a disable) holds from the very next call.
 */
export async function editKey(kernel: KernelServices, call: Call<EditKeyBody>): Promise<KeyAnswer> {
  const { body, caller } = call
  // Everything that depends only on the body is checked before any key is looked up.
  const columns = keyColumns(body)
  const keyId = await namedKeyId(kernel, body)
  const groupIds = body.GroupId === undefined ? undefined : await checkedGroupIds(kernel.db, caller.id, body.GroupId)
  const now = kernel.clock()

  const edited = await retryOnDeadlock(() =>
    kernel.db.transaction().execute(async (trx) => {
      const row = await editableKey(trx, kernel.dialect, keyId, caller.id)
      if (!row) throw keyNotFound()
      const changes = { ...columns, updated_at: now }
      if (body.Defaults !== undefined) {
        const tenant = resolveTenant(caller, body.Defaults, { parent: Number(row.parent), custno: Number(row.custno) })
        Object.assign(changes, { parent: tenant.parent, custno: tenant.custno })
      }
      try {
        await trx.updateTable('api_keys').set(changes).where('id', '=', keyId).execute()
      } catch (error) {
        if (isUniqueViolation(error)) throw nameTaken(columns.display_name ?? row.display_name)
        throw error
      }
      if (groupIds !== undefined) await replaceKeyGroups(trx, keyId, groupIds)
      return { ...row, ...changes }
    }),
  )
  kernel.keys.changed(keyId)
  return keyAnswer(keyId, edited.api_key, kernel.secrets.open(edited.secret_enc, edited.api_key), edited.display_name, edited.max_hits ?? null)
}
