/** Keys made straight in the store, for tests that need a particular key before or beside the keys plugin. */
import { issueKey, type KeyFields } from '../../kernel/auth/keyIssuer.ts'
import type { SigningKey } from '../../kernel/auth/signature.ts'
import type { DefaultGroup } from '../../kernel/plugin.ts'
import { createGroup } from '../../kernel/boot/bootstrap.ts'
import type { Service } from './service.ts'

export type TestKey = SigningKey & { id: number }

/** The groups the root admin key holds (every default group of the enabled plugins). */
export async function rootGroupIds(service: Service): Promise<number[]> {
  const rows = await service.kernel.database.db.selectFrom('api_key_groups').select('group_id').where('key_id', '=', service.admin.id).execute()
  return rows.map((row) => Number(row.group_id))
}

export async function groupNamed(service: Service, name: string): Promise<number> {
  const row = await service.kernel.database.db.selectFrom('api_groups').select('id').where('display_name', '=', name).executeTakeFirstOrThrow()
  return Number(row.id)
}

/**
 * A key of tenant 1/0 over plain HTTP unless `fields` say otherwise, holding the root
 * key's groups unless `groupIds` are given.
 */
export async function insertKey(
  service: Service,
  fields: Partial<KeyFields> = {},
  groupIds?: number[],
  now = Date.now(),
): Promise<TestKey> {
  const issued = await issueKey(service.kernel.database.db, service.kernel.secrets, now, {
    display_name: `key ${Math.random().toString(36).slice(2)}`,
    parent: 1,
    custno: 0,
    require_https: 0,
    ...fields,
  }, groupIds ?? (await rootGroupIds(service)))
  return { id: issued.id, apiKey: issued.apiKey, secret: issued.secret }
}

/** An admin key of another tenant (Parent, Custno), holding the root key's groups. */
export function tenantKey(service: Service, parent: number, custno: number): Promise<TestKey> {
  return insertKey(service, { display_name: `Tenant ${parent}/${custno}`, parent, custno })
}

export interface KeyTestGroups {
  keyAdmin: number
  aclReader: number
  people: number
  reports: number
}

/**
 * The groups the keys tests assign: the two defaults by name, and two plain groups made
 * here and given to the root admin key (plus `extra`, e.g. a wildcard group).
 */
export async function keyTestGroups<Extra extends Record<string, DefaultGroup>>(service: Service, extra: Extra = {} as Extra): Promise<KeyTestGroups & { [Name in keyof Extra]: number }> {
  const { db } = service.kernel.database
  const made: Record<string, number> = {
    people: await createGroup(db, { name: 'People readers', paths: [{ path: '/People/Read/*', displayName: 'Read people' }] }),
    reports: await createGroup(db, { name: 'Reports', paths: [{ path: '/Report/Read/Daily', displayName: 'Daily report' }] }),
  }
  for (const [name, group] of Object.entries(extra)) made[name] = await createGroup(db, group)
  await db.insertInto('api_key_groups').values(Object.values(made).map((group_id) => ({ key_id: service.admin.id, group_id }))).execute()
  service.kernel.services.keys.changed(service.admin.id)
  return {
    keyAdmin: await groupNamed(service, 'Key administration'),
    aclReader: await groupNamed(service, 'Access list reader'),
    ...made,
  } as KeyTestGroups & { [Name in keyof Extra]: number }
}
