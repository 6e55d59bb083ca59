import { defineRoute, type DefaultGroup, type Route } from '../../kernel/sdk.ts'
import { levelsAnswerSchema } from './schemas.ts'

/**
 * GET /Access/Level/List (D14): the log levels a call can have (the key's LogLevel or
 * the x-LogLevel header) and the fields of the log record (interface 2.3) each one
 * stores. This mirrors what the kernel's log stage writes (kernel/http/stages/log.ts);
 * test/log-levels.test.ts reads records back at every level to hold the two together.
 * Rsponse of an error answer (the short `Error: ...` text) is kept at every level; the
 * lists name what a successful call keeps.
 */
export const levelsPath = '/Access/Level/List'

// Interface 2.3 keeps only Request_Url, Http_User_Agent and Raw_Request (and D8 the
// answer) for levels above 1; every other field is stored at every level, so 0 and 1
// store the same.
const minimal = ['RequestTime', 'Http_Host', 'Server_Name', 'Server_Addr', 'Server_Port', 'Remote_Addr', 'Request_Scheme', 'Request_Method', 'Api_Acl', 'Api_Function', 'Response_Code', 'Bandwidth', 'Response_Format', 'Seconds', 'Secret']
const medium = minimal
const high = [...medium, 'Request_Url', 'Http_User_Agent', 'Raw_Request', 'Rsponse']

export interface LogLevel { Level: number; Name: string; Stores: string[] }

/** Levels above 2 act as 2. */
export const logLevels: readonly LogLevel[] = [
  { Level: 0, Name: 'minimal', Stores: minimal },
  { Level: 1, Name: 'medium', Stores: medium },
  { Level: 2, Name: 'high', Stores: high },
]

/** A group of its own, so installations made before this route get it for the root key only. */
export const levelsGroup: DefaultGroup = {
  name: 'Log level reader',
  paths: [{ path: levelsPath, displayName: 'List the log levels and what each one stores' }],
}

export function levelsRoute(): Route {
  return defineRoute({
    method: 'GET',
    path: levelsPath,
    answer: levelsAnswerSchema,
    xml: { root: 'LogLevels', item: 'LogLevel' },
    // One CSV row per level; its field list as one cell.
    csv: (levels: LogLevel[]) => levels.map((level) => ({ ...level, Stores: level.Stores.join(',') })),
    handler: () => logLevels,
  })
}
