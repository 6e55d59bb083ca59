import type { Insertable, Selectable } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { httpDate } from '../auth/apiDate.ts'
import type { LogRecord } from '../plugin.ts'

/**
 * A call's log record as it is queued and written (D8, interface 2.3). At LogLevel 2 an
 * answer served from the response cache is referenced as its own bytes, not copied into
 * a string on the request thread: `response` becomes text where the row is written
 * (Database.insertMany) or read back from the queue (`responseText`).
 */
export type LogRow = Omit<Insertable<CoreTables['api_log']>, 'response'> & { response?: string | Uint8Array | null }

/** A queued record's response as text. */
export function responseText(response: string | Uint8Array | null | undefined): string | null {
  if (response === null || response === undefined) return null
  return typeof response === 'string' ? response : Buffer.from(response.buffer, response.byteOffset, response.byteLength).toString('utf8')
}

/** The row as a plain insert takes it: its response as text, kept in the row (not shared: sharedAnswers.ts). */
export function storedRow(row: LogRow): Insertable<CoreTables['api_log']> {
  return row.response instanceof Uint8Array ? { ...row, response: responseText(row.response), response_digest: null } : (row as Insertable<CoreTables['api_log']>)
}

/**
 * Rsponse as stored: a successful answer is kept as JSON whatever format it was sent in
 * (see stages/log.ts), so it is given back as the value it was; error messages and
 * answers served from cache in XML/CSV are text.
 */
function parsedResponse(row: Selectable<CoreTables['api_log']> | LogRow): unknown {
  const text = responseText(row.response)
  if (text === null) return null
  if (Number(row.response_code) < 400 && (row.response_format === 'json' || text.startsWith('{') || text.startsWith('['))) {
    try {
      return JSON.parse(text)
    } catch {
      return text
    }
  }
  return text
}

export function toLogRecord(row: Selectable<CoreTables['api_log']> | LogRow): LogRecord & { Id: number } {
  return {
    Id: Number(row.id),
    RequestTime: httpDate(Number(row.request_time)),
    Http_Host: row.http_host ?? null,
    Server_Name: row.server_name ?? null,
    Server_Addr: row.server_addr ?? null,
    Server_Port: row.server_port === null || row.server_port === undefined ? null : Number(row.server_port),
    Remote_Addr: row.remote_addr ?? null,
    Request_Scheme: row.request_scheme ?? null,
    Request_Method: row.request_method,
    Api_Acl: row.api_acl === null || row.api_acl === undefined ? null : Number(row.api_acl),
    Api_Function: row.api_function,
    Request_Url: row.request_url ?? null,
    Http_User_Agent: row.http_user_agent ?? null,
    Raw_Request: row.raw_request ?? null,
    Response_Code: Number(row.response_code),
    Rsponse: parsedResponse(row),
    Response_Format: row.response_format ?? null,
    Seconds: Number(row.seconds),
    Bandwidth: Number(row.bandwidth),
    Secret: row.signed_with ?? null,
  }
}
