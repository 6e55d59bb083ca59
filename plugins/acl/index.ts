import { defineRoute, type Plugin } from '../../kernel/sdk.ts'

/**
 * The ACL plugin: GET /Api/Read/Acl (interface 4.3), the entries that apply to the
 * caller. Cached an hour per key; the kernel drops the key's partition when the key
 * is edited, so an edit shows on the very next call.
 */
const aclPlugin: Plugin = {
  name: 'acl',
  defaultGroups: [
    { name: 'Access list reader', paths: [{ path: '/Api/Read/Acl', displayName: 'Read the ACL entries that apply to your key' }] },
  ],
  setup(kernel) {
    return [
      defineRoute({
        method: 'GET',
        path: '/Api/Read/Acl',
        cache: { ttlSeconds: 3600, partition: (call) => kernel.cache.keyPartition(call.caller.id) },
        xml: { root: 'Acl', item: 'Entry' },
        handler: (call) =>
          call.caller.acl.map((entry) => ({
            Path: entry.path,
            Display_Name: entry.displayName,
            Id: entry.id,
            Is_Public: entry.isPublic,
            Require_Https: entry.requireHttps,
            Require_Hash: entry.requireHash,
          })),
      }),
    ]
  },
}

export default aclPlugin
