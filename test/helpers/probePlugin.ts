/** A small plugin for kernel tests: routes that echo what the kernel handed them. */
import { defineRoute, type Plugin } from '../../kernel/sdk.ts'

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
        const { keys } = await kernel.keys.createdBy(0)
        return { Keys: keys.length }
      },
    }),
    defineRoute({ method: 'GET', path: '/Probe/Echo', xml: { root: 'Echo' }, handler: (call) => ({ Key: call.caller.displayName, Acl: call.acl?.path ?? null }) }),
    defineRoute({ method: 'GET', path: '/Probe/Public', xml: { root: 'Public' }, handler: (call) => ({ Anonymous: call.caller.anonymous }) }),
    defineRoute({ method: 'GET', path: '/Probe/Unlisted', xml: { root: 'Unlisted' }, handler: () => ({ Ok: 1 }) }),
    defineRoute({ method: 'GET', path: '/Probe/Deep/Level/Three', xml: { root: 'Deep' }, handler: () => ({ Depth: 3 }) }),
    defineRoute({ method: 'GET', path: '/Probe/Deep', xml: { root: 'Deep' }, handler: () => ({ Depth: 1 }) }),
    // The POST probes change nothing: reads, replayable like any read.
    defineRoute({ method: 'POST', path: '/Probe/Today', dayCode: true, writes: false, xml: { root: 'Today' }, handler: () => ({ Ok: 1 }) }),
    defineRoute<{ Name: string; Count?: number }>({
      method: 'POST',
      path: '/Probe/Body',
      writes: false,
      body: { type: 'object', required: ['Name'], additionalProperties: false, properties: { Name: { type: 'string', maxLength: 100 }, Count: { type: 'integer' } } },
      xml: { root: 'Body' },
      handler: (call) => ({ Name: call.body.Name, Count: call.body.Count ?? 0 }),
    }),
  ],
}
