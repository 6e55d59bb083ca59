import type { Config } from '../config.ts'
import type { CallLog, LogRow } from '../callLog.ts'
import type { Exchange } from '../exchange.ts'
import { peerAddress } from './authorize.ts'
import type { IncomingMessage } from 'node:http'

const credentialHeaders = new Set(['authorization', 'x-apikey', 'x-apidate', 'x-apihmac', 'x-apitoday'])
const maxStoredBody = 64 * 1024

/** The effective log level (D8): the x-LogLevel header if it is a number, else the key's LogLevel. */
export function logLevelOf(exchange: Exchange): number {
  const header = exchange.request.headers['x-loglevel']
  if (typeof header === 'string' && /^\d{1,2}$/.test(header.trim())) return Number(header)
  return exchange.caller.logLevel
}

function clip(text: string): string {
  return text.length > maxStoredBody ? `${text.slice(0, maxStoredBody)}...[${text.length - maxStoredBody} more characters]` : text
}

function rawRequest(request: IncomingMessage, body: Buffer | undefined): string {
  const headers: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(request.headersDistinct)) {
    // Credentials are never stored; the key is already the record's owner.
    headers[name] = credentialHeaders.has(name) ? '[redacted]' : (value!.length === 1 ? value![0] : value!)
  }
  return JSON.stringify({ method: request.method, url: request.url, headers, body: body ? clip(body.toString('utf8')) : '' })
}

/**
 * Builds the call's log record at its level (D8) and queues it. Level 0 keeps what
 * the call was and how it ended; 1 adds where it came from and went to; 2 or more
 * adds the URL, user agent, raw request and the answer's body.
 */
export function callLogger(callLog: CallLog, config: Config, isSecure: (request: IncomingMessage) => boolean) {
  return (exchange: Exchange, status: number, body: Buffer, format: string): void => {
    const request = exchange.request
    const level = logLevelOf(exchange)
    const detailed = level >= 2
    const socket = request.socket
    const row: LogRow = {
      id: exchange.requestId,
      key_id: exchange.caller.anonymous ? null : exchange.caller.id,
      request_time: exchange.startedAt,
      http_host: level >= 1 ? (request.headers.host ?? null) : null,
      server_name: level >= 1 ? config.serverName : null,
      server_addr: level >= 1 ? (socket.localAddress?.replace(/^::ffff:/, '') ?? null) : null,
      server_port: level >= 1 ? (socket.localPort ?? null) : null,
      remote_addr: peerAddress(request),
      request_scheme: level >= 1 ? (isSecure(request) ? 'HTTPS' : 'HTTP') : null,
      request_method: request.method ?? 'GET',
      api_acl: exchange.acl?.id ?? null,
      api_function: exchange.mounted.route.path,
      request_url: detailed ? (request.url ?? null) : null,
      http_user_agent: detailed ? (request.headers['user-agent'] ?? null) : null,
      raw_request: detailed ? rawRequest(request, exchange.rawBody) : null,
      response_code: status,
      // Error messages are short and always kept; answers only at level 2.
      response: detailed || status >= 400 ? clip(body.toString('utf8')) : null,
      response_format: status >= 400 ? 'text' : format,
      seconds: Math.round(performance.now() - exchange.startedTick) / 1000,
      bandwidth: (exchange.rawBody?.length ?? 0) + body.length,
      detail_until: detailed ? callLog.detailUntil(exchange.startedAt, exchange.caller.logRaw) : 0,
    }
    callLog.append(row)
  }
}
