import { badRequest, isUniqueViolation, type Call, type KernelServices } from '../../kernel/sdk.ts'
import type { CreateKeyBody } from './schemas.ts'
import { keyColumns, nameTaken } from './keyInput.ts'
import { resolveTenant } from './tenantScope.ts'
import { checkedGroupIds } from './groupRules.ts'
import { keyAnswer, type KeyAnswer } from './keyAnswer.ts'
import { checkCreditInput, creditColumns } from './creditInput.ts'

/**
 * POST /Api/Create/Key (interface 4.1). The name's uniqueness is left to the unique
 * index on (parent, display_name): of two racing creates one commits and the other
 * meets the index, so there is no window between a check and the write.
 */
export async function createKey(kernel: KernelServices, call: Call<CreateKeyBody>): Promise<KeyAnswer> {
  const { body, caller } = call
  const columns = keyColumns(body)
  checkCreditInput(body)
  const tenant = resolveTenant(caller, body.Defaults, { parent: caller.parent, custno: caller.custno })
  const groupIds = await checkedGroupIds(kernel, caller.id, body.GroupId)
  const now = kernel.clock()
  // StartDate "often equals the creation date" (interface 2.1): that is its default.
  const startDate = columns.start_date ?? now
  if (columns.end_date != null && columns.end_date <= startDate) {
    throw badRequest('EndDate must be after StartDate (which defaults to now).')
  }
  const displayName = body.Display_Name
  try {
    const issued = await kernel.keys.create({
      ...columns,
      ...creditColumns(body, null, now),
      display_name: displayName,
      start_date: startDate,
      parent: tenant.parent,
      custno: tenant.custno,
      created_by: caller.id,
    }, groupIds, { requestId: call.requestId })
    return keyAnswer(issued.id, issued.apiKey, issued.secret, displayName, columns.max_hits ?? null)
  } catch (error) {
    if (isUniqueViolation(error)) throw nameTaken(displayName)
    throw error
  }
}
