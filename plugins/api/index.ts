import type { Plugin } from '../../kernel/sdk.ts'
import { serversGroup, serversRoute } from './servers.ts'

/**
 * The api plugin: what a caller may read about the service itself (D14).
 * (This index mounts GET /Api/Read/Servers; the list, changes and openapi routes join it.)
 */
const apiPlugin: Plugin = {
  name: 'api',
  defaultGroups: [serversGroup],
  setup: (kernel) => [serversRoute(kernel)],
}

export default apiPlugin
