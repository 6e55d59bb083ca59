import { badRequest, compileAclPath, type GroupRecord, type KernelServices } from '../../kernel/sdk.ts'

/** The route whose ACL coverage makes a group "allow key creation" (D9). */
export const createKeyPath = '/Api/Create/Key'

export type { GroupRecord }

const groupIdListProblem = 'GroupId must be a group id, a comma-separated list of group ids, or an array of group ids.'

/** GroupId in any of its D9 spellings -> distinct ids, in the order given. */
export function parseGroupIds(value: number | string | number[]): number[] {
  const ids = typeof value === 'number'
    ? [value]
    : Array.isArray(value)
      ? value
      : value.split(',').map((item) => {
        const text = item.trim()
        if (!/^\d{1,15}$/.test(text)) throw badRequest(groupIdListProblem)
        return Number(text)
      })
  if (ids.length === 0 || ids.some((groupId) => groupId < 1)) throw badRequest(groupIdListProblem)
  return [...new Set(ids)]
}

/** True when one of the paths covers POST /Api/Create/Key. */
export function allowsKeyCreation(paths: readonly string[]): boolean {
  return paths.some((path) => compileAclPath(path)(createKeyPath))
}

/**
 * The groups a key may assign (D9): every group it holds itself except those that
 * allow key creation, so privilege can only shrink down the chain of keys (the admin
 * default group among them, with the paths only admins may call, D14). Read from the
 * database rather than the cached auth record, so an operator's change of the caller's
 * groups counts at once.
 */
export async function assignableGroups(kernel: KernelServices, callerKeyId: number): Promise<GroupRecord[]> {
  return (await kernel.keys.groupsOf(callerKeyId)).filter((group) => !allowsKeyCreation(group.Paths))
}

/**
 * Checks a requested assignment against what the caller may assign. A group that does
 * not exist and one the caller may not assign get the same answer: no hint of what
 * other groups there are.
 */
export async function checkedGroupIds(kernel: KernelServices, callerKeyId: number, groupIdInput: number | string | number[]): Promise<number[]> {
  const requested = parseGroupIds(groupIdInput)
  const assignable = new Set((await assignableGroups(kernel, callerKeyId)).map((group) => group.Id))
  for (const groupId of requested) {
    if (!assignable.has(groupId)) {
      throw badRequest(`GroupId ${groupId} is not a group you may assign (see GET /Api/Read/Groups).`)
    }
  }
  return requested
}
