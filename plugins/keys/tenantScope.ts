import { badRequest, type CallerKey } from '../../kernel/sdk.ts'

export interface TenantScope {
  parent: number
  custno: number
}

/**
 * The tenant of a new or edited key from its Defaults (D9): Parent is always the
 * caller's; Custno is the caller's too, unless the caller is parent-wide (Custno 0)
 * and may then place keys under any customer of its parent. A member left out keeps
 * `current` (the edited key's value, or the caller's for a new key). The messages
 * name only the caller's own values, never whether another tenant exists.
 */
export function resolveTenant(caller: CallerKey, defaults: { Parent?: number; Custno?: number } | undefined, current: TenantScope): TenantScope {
  const parent = defaults?.Parent ?? current.parent
  const custno = defaults?.Custno ?? current.custno
  if (parent !== caller.parent) throw badRequest(`Defaults.Parent must be your own Parent (${caller.parent}).`)
  if (caller.custno !== 0 && custno !== caller.custno) throw badRequest(`Defaults.Custno must be your own Custno (${caller.custno}).`)
  return { parent, custno }
}
