import { badRequest, httpDate, isUniqueViolation, notFound, type Call, type KernelServices, type KeyChanges } from '../../kernel/sdk.ts'
import type { EditKeyBody } from './schemas.ts'
import { keyColumns, nameTaken } from './keyInput.ts'
import { resolveTenant } from './tenantScope.ts'
import { checkedGroupIds } from './groupRules.ts'
import { keyAnswer, type KeyAnswer } from './keyAnswer.ts'
import { checkCreditInput, creditColumns } from './creditInput.ts'

// One text for "no such key" and "not yours" (interface 4.2, D6): no key's existence leaks.
export const keyNotFound = () => notFound('Key not found.')

/**
 * The key an edit names (interface 4.2): KeyId and/or ApiKey; both given must name
 * the same key. Comparing against ApiKey's owner leaks nothing: the answer depends
 * only on whether the caller already holds that Api_Key value.
 */
export async function namedKeyId(kernel: KernelServices, body: Pick<EditKeyBody, 'KeyId' | 'ApiKey'>): Promise<number> {
  if (body.KeyId === undefined && body.ApiKey === undefined) throw badRequest('KeyId or ApiKey is required.')
  if (body.ApiKey === undefined) return body.KeyId!
  const byApiKey = await kernel.keys.idByApiKey(body.ApiKey)
  // An ApiKey that names no key is "not found" (D6), whatever KeyId says: only two keys can differ.
  if (byApiKey === undefined) throw keyNotFound()
  if (body.KeyId !== undefined && byApiKey !== body.KeyId) throw badRequest('KeyId and ApiKey do not name the same key.')
  return byApiKey
}

/**
 * POST /Api/Edit/Key (interface 4.2): changes only the given fields, all or nothing in
 * one transaction. The kernel drops the key's cached auth record and answers itself,
 * so the change (a group less, a disable) holds from the very next call.
 */
export async function editKey(kernel: KernelServices, call: Call<EditKeyBody>): Promise<KeyAnswer> {
  const { body, caller } = call
  // Everything that depends only on the body is checked before any key is looked up.
  const columns = keyColumns(body)
  checkCreditInput(body)
  const keyId = await namedKeyId(kernel, body)
  const groupIds = body.GroupId === undefined ? undefined : await checkedGroupIds(kernel, caller.id, body.GroupId)
  let edited
  try {
    edited = await kernel.keys.edit(keyId, caller.id, (current) => {
      // StartDate alone must still leave the key a time to work (create and a two-date edit refuse the same).
      if (columns.start_date != null && columns.end_date === undefined && current.end_date !== null && Number(current.end_date) <= columns.start_date) {
        throw badRequest(`StartDate must be before the key's EndDate (${httpDate(Number(current.end_date))}); send EndDate too (null for none).`)
      }
      // Credits are computed from the locked row (AddCredits adds to what is stored now).
      const changes: KeyChanges = { ...columns, ...creditColumns(body, current, kernel.clock()) }
      if (body.Defaults !== undefined) {
        const tenant = resolveTenant(caller, body.Defaults, { parent: Number(current.parent), custno: Number(current.custno) })
        Object.assign(changes, { parent: tenant.parent, custno: tenant.custno })
      }
      return changes
    }, groupIds, { requestId: call.requestId })
  } catch (error) {
    if (isUniqueViolation(error)) throw nameTaken(columns.display_name ?? body.Display_Name ?? '')
    throw error
  }
  if (!edited) throw keyNotFound()
  const { record, secret } = edited
  return keyAnswer(keyId, record.api_key, secret, record.display_name, record.max_hits ?? null)
}
