import { badRequest, forbidden, parseInputDate, parseInputDateUntil, type Call, type KernelServices } from '../../kernel/sdk.ts'
import type { ReadAuditBody } from './schemas.ts'
import { allowsKeyCreation } from './groupRules.ts'

const pageSize = 100

function dateFilter(name: string, text: string | undefined, parse: (text: string) => number | null): number | undefined {
  if (text === undefined) return undefined
  const time = parse(text)
  if (time === null) throw badRequest(`${name} must be a date (HTTP-date, RFC 3339 or YYYY-MM-DD).`)
  return time
}

/**
 * POST /Api/Read/Audit (issue 16 item 4): the administrative changes of the caller's
 * tenant, newest first, 100 a page. Only a key that may create keys reads them (the
 * same authority that makes the changes); a Custno 0 administrator sees every customer
 * of its Parent, any other key its own customer only.
 */
export async function readAuditTrail(kernel: KernelServices, call: Call<ReadAuditBody>) {
  const { caller } = call
  const body = call.body ?? {}
  const from = dateFilter('from', body.from, parseInputDate)
  // Inclusive, as History's and Deliveries' To: a record's At (whole seconds) finds it, and a date alone takes in its whole day.
  const to = dateFilter('to', body.to, parseInputDateUntil)
  if (from !== undefined && to !== undefined && from > to) throw badRequest('from must not be after to.')
  // Parent 0 is the installation's (its group, ACL and master key changes); keys an earlier
  // version let the operator put there must not read them: the operator reads table api_audit.
  if (caller.parent === 0) throw forbidden("Parent 0 is the installation's: its audit trail is read by the operator, not by a key.")
  const groups = await kernel.keys.groupsOf(caller.id)
  if (!groups.some((group) => allowsKeyCreation(group.Paths))) throw forbidden('Only a key that may create keys reads the audit trail.')
  return kernel.keys.audit({
    parent: caller.parent,
    custno: caller.custno === 0 ? null : caller.custno,
    keyId: body.KeyId,
    from,
    to,
    page: body.page ?? 1,
    size: pageSize,
  })
}
