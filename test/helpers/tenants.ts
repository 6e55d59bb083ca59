/** Tenant entitlements and display players made straight in the store, as the operator CLI makes them. */
import { changeEntitlement, type EntitlementChange } from '../../kernel/tenants/entitlements.ts'
import { addPlayer } from '../../kernel/tenants/players.ts'
import type { Service } from './service.ts'
import type { TestKey } from './keys.ts'

export async function setEntitlement(service: Service, parent: number, custno: number, change: EntitlementChange) {
  return (await changeEntitlement(service.kernel.database.db, { parent, custno }, change, Date.now())).entitlement
}

/** A player of (parent, custno) and its key (plain HTTP allowed), after the tenant's MaxPlayers check. */
export async function addTestPlayer(
  service: Service,
  parent: number,
  custno: number,
  name: string,
  options: { dispGroup?: string; location?: string } = {},
): Promise<TestKey & { playerId: number }> {
  const added = await addPlayer(service.kernel.database.db, service.kernel.secrets, Date.now(), {
    parent, custno, name, dispGroup: options.dispGroup ?? null, location: options.location ?? null, requireHttps: 0,
  }, (trx) => service.kernel.services.tenants.ensureRoom(trx, 'Players', [{ parent, custno, count: 1 }]))
  return { id: added.id, apiKey: added.apiKey, secret: added.secret, playerId: added.playerId }
}
