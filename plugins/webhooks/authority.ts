import { compileAclPath, forbidden, type CallerKey, type KernelServices } from '../../kernel/sdk.ts'

const createKeyPath = '/Api/Create/Key'

/**
 * Webhooks are managed by keys that may create keys (issue 17): one of the caller's
 * groups covers POST /Api/Create/Key (D9's rule), read from the database so an
 * operator's change of the caller's groups counts at once.
 */
export async function requireKeyAdministrator(kernel: KernelServices, caller: CallerKey): Promise<void> {
  const groups = await kernel.keys.groupsOf(caller.id)
  if (!groups.some((group) => group.Paths.some((path) => compileAclPath(path)(createKeyPath)))) {
    throw forbidden('Only a key that may create keys manages webhooks.')
  }
}

/** The webhooks a caller sees (D9): its Parent's, and only its own customer's unless it is parent-wide (Custno 0). */
export interface WebhookScope {
  parent: number
  custno: number | null
}

export function scopeOf(caller: CallerKey): WebhookScope {
  return { parent: caller.parent, custno: caller.custno === 0 ? null : caller.custno }
}
