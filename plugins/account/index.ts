import type { Plugin } from '../../kernel/sdk.ts'
import { accountRoutes } from './routes.ts'

/**
 * The account plugin (D14): what a caller may read about itself: its own key, its
 * groups, its tenant's entitlement and usage (the license), and its tenant's display
 * players. Keys, groups, entitlements and players are the kernel's; this plugin only
 * reads them through `kernel.keys` and `kernel.tenants`.
 *
 * - routes.ts   the four routes and their schemas
 * - answers.ts  the answer records and their JSON schemas
 */
const accountPlugin: Plugin = {
  name: 'account',
  defaultGroups: [
    {
      name: 'Account readers',
      paths: [{ path: '/account/read/*', displayName: 'Read your own key, groups, license and display players' }],
    },
  ],
  setup: accountRoutes,
}

export default accountPlugin
