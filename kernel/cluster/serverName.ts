/**
 * A process's Server_Name (interface 2.3: "typically a fixed prefix plus the cloud server
 * id"): config `serverName` with `{node}` replaced by the process's Node_Id, so the
 * default `keygate-{node}` names each process of a cluster apart without configuration,
 * and follows the id when a process has to claim another one.
 */
export function serverNameFor(template: string, nodeId: number): string {
  return template.replaceAll('{node}', String(nodeId))
}
