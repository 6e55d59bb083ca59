import type { Plugin } from '../../kernel/sdk.ts'
import { operationRoutes } from './operations.ts'
import { changeRoutes } from './changes.ts'
import { openApiRoutes } from './openapi.ts'
import { referenceRoutes } from './reference.ts'
import { serversGroup, serversRoute } from './servers.ts'

/**
 * The api plugin (issue 13, D14, D15): what a caller may learn about the service
 * itself. The operations it may call, the change history (JSON/XML/CSV and RSS), the
 * OpenAPI document and a reference page rendered from it, and the live service
 * processes (admin only). The change history, OpenAPI and reference page are public: an Is_Public ACL entry of a default group lets them be called without
 * credentials.
 */
const apiPlugin: Plugin = {
  name: 'api',
  defaultGroups: [
    { name: 'Operation list reader', paths: [{ path: '/Api/Read/List', displayName: 'List the operations you may call' }] },
    {
      name: 'Public service documents',
      paths: [
        { path: '/Api/Read/Changes', displayName: 'The change history of the interface', isPublic: 1 },
        { path: '/Api/Read/Changes/Rss', displayName: 'The change history as an RSS feed', isPublic: 1 },
        { path: '/Api/Read/OpenApi', displayName: 'The OpenAPI 3.1 document of every operation', isPublic: 1 },
        { path: '/Api/Read/Reference', displayName: 'The API reference page', isPublic: 1 },
        { path: '/Api/Read/Reference/*', displayName: 'The files of the API reference page', isPublic: 1 },
      ],
    },
    serversGroup,
  ],
  setup: (kernel) => [
    ...operationRoutes(kernel),
    ...changeRoutes(kernel),
    ...openApiRoutes(kernel),
    ...referenceRoutes(),
    serversRoute(kernel),
  ],
}

export default apiPlugin
