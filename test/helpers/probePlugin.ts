/** A small plugin for kernel tests: routes that echo what the kernel handed them. */
import { defineRoute, type Plugin } from '../../kernel/plugin.ts'
import type { HashMethod } from '../../kernel/signature.ts'
import { issueKey, type KeyFields } from '../../kernel/keyIssuer.ts'
import type { Service } from './service.ts'

export const probePlugin: Plugin = {
  name: 'probe',
  defaultGroups: [
    {
      name: 'Probe',
      paths: [
        { path: '/Probe/Echo', displayName: 'echo' },
        { path: '/Probe/Body', displayName: 'body' },
        { path: '/Probe/Today', displayName: 'needs the day code' },
        { path: '/Probe/Deep/*', displayName: 'everything below Deep' },
        { path: '/Probe/Count', displayName: 'reads the database on every call' },
      ],
    },
    { name: 'Probe public', paths: [{ path: '/Probe/Public', displayName: 'open to all', isPublic: 1 }] },
  ],
  setup: (kernel) => [
    defineRoute({
      method: 'GET',
      path: '/Probe/Count',
      xml: { root: 'Count' },
      handler: async () => {
        const row = await kernel.db.selectFrom('api_keys').select((eb) => eb.fn.countAll<number>().as('keys')).executeTakeFirstOrThrow()
        return { Keys: Number(row.keys) }
      },
    }),
    defineRoute({ method: 'GET', path: '/Probe/Echo', xml: { root: 'Echo' }, handler: (call) => ({ Key: call.caller.displayName, Acl: call.acl?.path ?? null }) }),
    defineRoute({ method: 'GET', path: '/Probe/Public', xml: { root: 'Public' }, handler: (call) => ({ Anonymous: call.caller.anonymous }) }),
    defineRoute({ method: 'GET', path: '/Probe/Unlisted', xml: { root: 'Unlisted' }, handler: () => ({ Ok: 1 }) }),
    defineRoute({ method: 'GET', path: '/Probe/Deep/Level/Three', xml: { root: 'Deep' }, handler: () => ({ Depth: 3 }) }),
    defineRoute({ method: 'GET', path: '/Probe/Deep', xml: { root: 'Deep' }, handler: () => ({ Depth: 1 }) }),
    defineRoute({ method: 'POST', path: '/Probe/Today', dayCode: true, xml: { root: 'Today' }, handler: () => ({ Ok: 1 }) }),
    defineRoute<{ Name: string; Count?: number }>({
      method: 'POST',
      path: '/Probe/Body',
      body: { type: 'object', required: ['Name'], additionalProperties: false, properties: { Name: { type: 'string', maxLength: 100 }, Count: { type: 'integer' } } },
      xml: { root: 'Body' },
      handler: (call) => ({ Name: call.body.Name, Count: call.body.Count ?? 0 }),
    }),
  ],
}

/** A key made directly in the store, holding the root key's groups unless told otherwise. */
export async function makeKey(
  service: Service,
  fields: Partial<KeyFields> & { require_hash?: HashMethod | null } = {},
  groupIds?: number[],
): Promise<{ id: number; apiKey: string; secret: string }> {
  const db = service.kernel.database.db
  const groups = groupIds ?? (await db.selectFrom('api_key_groups').select('group_id').where('key_id', '=', service.admin.id).execute()).map((row) => Number(row.group_id))
  return issueKey(db, service.kernel.services.secrets, Date.now(), {
    display_name: `key ${Math.random().toString(36).slice(2)}`,
    parent: 1,
    custno: 0,
    require_https: 0,
    ...fields,
  }, groups)
}
