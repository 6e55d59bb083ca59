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

/**
 * The widths of api_log's text columns that a caller's request fills (MariaDB refuses a
 * longer value, and the record would be lost; SQLite would keep it whole): the Host
 * header and the client's address as sent, Request_Url and Http_User_Agent (`text`,
 * 65,535 bytes: request text is latin1, at most 2 bytes a character as utf8mb4).
 */
export const loggedTextMax = { host: 255, address: 64, requestText: 32_000 } as const

/** A request's text cut to its column's width; null when the request has none. */
export function boundedText(text: string | undefined, max: number): string | null {
  if (text === undefined) return null
  return text.length <= max ? text : text.slice(0, max)
}

/**
 * The row of a record the database refused as it was (a value no column check foresaw):
 * every text cut to a width that any column takes, so the call keeps its record (its id,
 * key, status and times) rather than losing it.
 */
export function narrowedRow(row: LogRow): Insertable<CoreTables['api_log']> {
  const narrow = (text: string | null | undefined, max: number) => (typeof text === 'string' ? text.slice(0, max) : text ?? null)
  return {
    ...storedRow(row),
    http_host: narrow(row.http_host, loggedTextMax.host),
    server_name: narrow(row.server_name, 100),
    server_addr: narrow(row.server_addr, loggedTextMax.address),
    remote_addr: narrow(row.remote_addr, loggedTextMax.address),
    request_scheme: narrow(row.request_scheme, 8),
    request_method: narrow(row.request_method, 8) ?? 'GET',
    api_function: narrow(row.api_function, 255) ?? '',
    request_url: narrow(row.request_url, 1000),
    http_user_agent: narrow(row.http_user_agent, 1000),
    raw_request: narrow(row.raw_request, 1000),
    response: narrow(responseText(row.response), 1000),
    response_format: narrow(row.response_format, 8),
    signed_with: narrow(row.signed_with, 8),
    response_digest: null,
  }
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
