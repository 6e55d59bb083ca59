import { defineRoute, httpDate, type DefaultGroup, type KernelServices, type Route } from '../../kernel/sdk.ts'

/**
 * GET /Api/Read/Servers (D14, D16): the live processes of the service, those whose
 * heartbeat the database saw within `nodes.expireMs` (30 s). Not cached: it is live state.
 */
export const serversPath = '/Api/Read/Servers'

/**
 * Only the operator's root key gets this group at first start; it tells how the service
 * is deployed, so no key may pass it on and tenant admins do not get it (D14: "in the
 * admin default group only").
 */
export const serversGroup: DefaultGroup = {
  name: 'Service administration',
  paths: [{ path: serversPath, displayName: 'List the live service processes' }],
  operatorOnly: true,
}

export function serversRoute(kernel: KernelServices): Route {
  return defineRoute({
    method: 'GET',
    path: serversPath,
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
