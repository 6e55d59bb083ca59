import { adminGroupName, defineRoute, httpDate, type DefaultGroup, type KernelServices, type Route } from '../../kernel/sdk.ts'
import { serversAnswerSchema } from './schemas.ts'

/**
 * GET /Api/Read/Servers (D14, D16): the live processes of the service, those whose
 * heartbeat the database saw within `nodes.expireMs` (30 s). Not cached: it is live state.
 */
export const serversPath = '/Api/Read/Servers'

/**
 * D14: "Its path is in the admin default group only". The path joins the keys plugin's
 * admin group, which allows key creation and so is never assignable (D9): the root key
 * and the tenant admins made by `admin key bootstrap` hold it, and no key can be given it.
 */
export const serversGroup: DefaultGroup = {
  name: adminGroupName,
  paths: [{ path: serversPath, displayName: 'List the live service processes' }],
}

export function serversRoute(kernel: KernelServices): Route {
  return defineRoute({
    method: 'GET',
    path: serversPath,
    answer: serversAnswerSchema,
    xml: { root: 'Servers', item: 'Server' },
    handler: async () =>
      (await kernel.servers.live()).map((server) => ({
        Server_Name: server.serverName,
        Server_Addr: server.serverAddr,
        Server_Port: server.serverPort,
        Node_Id: server.nodeId,
        Started: httpDate(server.started),
        Last_Seen: httpDate(server.lastSeen),
        Version: server.version,
      })),
  })
}
