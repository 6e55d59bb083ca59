import { adminGroupName, type Plugin } from '../../kernel/sdk.ts'
import { keyRoutes } from './routes.ts'

/**
 * The keys plugin (issue 3): create, edit and list API keys, and list the groups a
 * key may hand on (interface 2.1, 3, 4.1, 4.2, 4.6; D9). Privilege only shrinks
 * down the chain of keys: a key assigns only groups it holds, never one that allows
 * key creation, and edits only keys it created.
 */
const keysPlugin: Plugin = {
  name: 'keys',
  defaultGroups: [
    {
      // The admin default group: it covers /Api/Create/Key, so it "allows key creation" and is never assignable (D9).
      name: adminGroupName,
      paths: [
        { path: '/Api/Create/Key', displayName: 'Create API keys' },
        { path: '/Api/Edit/Key', displayName: 'Edit or disable the keys you created' },
        { path: '/Api/Read/Keys', displayName: 'List the keys you created' },
        { path: '/Api/Read/Groups', displayName: 'List the groups you may assign to keys' },
      ],
    },
    {
      // A group of its own, so an operator can take it from one administrator; on an upgrade it
      // reaches the keys that may create keys (the admin group's holders) and no other key.
      name: 'Key rotation and audit',
      alsoHeldBy: adminGroupName,
      paths: [
        { path: '/Api/Rotate/Key', displayName: 'Rotate the secret of the keys you created, with an overlap' },
        { path: '/Api/Read/Audit', displayName: "Read your tenant's audit trail (keys that may create keys)" },
      ],
    },
  ],
  setup: (kernel) => keyRoutes(kernel),
}

export default keysPlugin
