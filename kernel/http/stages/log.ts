import type { IncomingMessage } from 'node:http'
import { serverNameFor } from '../../cluster/serverName.ts'
import { nodeOfId } from '../../callLog/requestId.ts'
import type { Config } from '../../boot/config.ts'
import type { CallLog, LogRow } from '../../callLog/callLog.ts'
import { boundedText, loggedTextMax } from '../../callLog/record.ts'
import type { Exchange } from '../exchange.ts'
import { bodyBytes, type AnswerBody } from '../bodyPieces.ts'
import type { Stage } from '../pipeline.ts'
import { plainAddress } from '../transport.ts'
import { headerRedaction } from '../../callLog/headerRedaction.ts'
import type { ProxyTrust } from '../proxyTrust.ts'
import { AnswerDigests } from '../../callLog/sharedAnswers.ts'
import { errorAnswer } from '../failure.ts'

const maxStoredBody = 64 * 1024

/**
 * The effective log level (D8): the x-LogLevel header if it is a whole number, else the
 * key's LogLevel. A malformed header is ignored rather than refused: logging is the
 * caller's convenience, not part of the call. Any whole number counts, however many
 * digits (`100` or `002`, as a key's LogLevel may be 100): levels above 2 act as 2, so
 * the level is capped there, which also keeps a long run of digits a small number.
 */
export function logLevelOf(exchange: Exchange): number {
  const header = exchange.request.headers['x-loglevel']
  if (typeof header === 'string' && /^\d+$/.test(header.trim())) return Math.min(Number(header), 2)
  return exchange.caller.logLevel
}

function clip(text: string): string {
  return text.length > maxStoredBody ? `${text.slice(0, maxStoredBody)}...[${text.length - maxStoredBody} more characters]` : text
}

// A new key's Api_Secret is in the answer of create/edit: it must not live on in the log.
// A field naming a time (a rotation's OldSecretEnds, its OldSecretValidFor) is no secret and stays readable.
const secretField = /secret|password/i
const timeField = /(Ends|Date|ValidFor)$/
function withoutSecrets(name: string, value: unknown): unknown {
  return secretField.test(name) && !timeField.test(name) && (typeof value === 'string' || typeof value === 'number') ? '[redacted]' : value
}

/**
 * Raw_Request: `{ method, url, headers, body }` as JSON, headers from rawHeaders (every
 * line as sent, names lower-cased, credentials `[redacted]`, a repeated name an array),
 * without building headersDistinct. A plain object is the fastest to stringify (text
 * put together piece by piece was as fast in a loop, slower in the service: a string of
 * many pieces to flatten); what it inherits (`constructor`, `toString`, ...) is a
 * function, never a header's value, and a header named `__proto__` has the request
 * built on an object without a prototype (slower, so only then).
 */
export function rawRequest(
  request: Pick<IncomingMessage, 'method' | 'url' | 'rawHeaders'>,
  body: Buffer | undefined,
  redacted: (name: string) => boolean,
  headers: Record<string, string | string[]> = {},
): string {
  const raw = request.rawHeaders
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index].toLowerCase()
    if (name === '__proto__' && Object.getPrototypeOf(headers) !== null) return rawRequest(request, body, redacted, Object.create(null))
    // Credentials are never stored; the key is already the record's owner.
    const value = redacted(name) ? '[redacted]' : raw[index + 1]
    const earlier = headers[name]
    headers[name] = typeof earlier === 'string' ? [earlier, value] : Array.isArray(earlier) ? [...earlier, value] : value
  }
  return JSON.stringify({ method: request.method, url: request.url, headers, body: body ? clip(loggedBody(body.toString('utf8'))) : '' })
}

/**
 * The body as sent, but a JSON body with a secret field (a webhook's Secret) has its
 * value redacted, as the answer's are: the plain text of a value the service keeps
 * sealed must not live on in the log. Parsed only when the text names such a field.
 */
function loggedBody(text: string): string {
  if (!secretField.test(text)) return text
  try {
    return JSON.stringify(JSON.parse(text), withoutSecrets)
  } catch {
    // Not JSON (a trailing comma, a cut-off body: answered 400): its secret fields' string values are redacted in the text.
    return text.replace(secretMember, (member: string, head: string, name: string) => (timeField.test(name) ? member : `${head}"[redacted]"`))
  }
}

// A JSON member whose name names a secret, with a string value: "Secret" : "whsec_..."
const secretMember = /("([^"\\]*(?:secret|password)[^"\\]*)"\s*:\s*)"(?:[^"\\]|\\.)*"?/gi

/**
 * The answer as logged at level 2: the handler's value as JSON (whatever format it was
 * sent in, so a log reader gets the value back, and secret fields redacted); an answer
 * served from the response cache has no value at hand and is kept as sent: its bytes,
 * referenced (the cache's buffer is never written again), made text off this thread,
 * and stored once for all the records that name it (callLog/sharedAnswers.ts).
 */
function loggedAnswer(exchange: Exchange, body: AnswerBody): string | Buffer {
  if (exchange.result !== undefined) return clip(JSON.stringify(exchange.result, withoutSecrets))
  const bytes = bodyBytes(body)
  return bytes.length > maxStoredBody ? clip(bytes.toString('utf8')) : bytes
}

/**
 * Builds the call's log record at its level (D8) and queues it. What each level stores
 * (docs/rate-limits-and-logs.md has the table):
 * - 0 and 1: RequestTime, Http_Host, Server_Name, Server_Addr, Server_Port, Remote_Addr,
 *   Request_Scheme, Request_Method, Api_Acl, Api_Function, Response_Code,
 *   Response_Format, Seconds, Bandwidth, and Rsponse for error answers (the short
 *   `Error: ...` text, kept as long as the record): interface 2.3 keeps only the
 *   details below for levels above 1;
 * - 2 or more: adds the details Request_Url, Http_User_Agent, Raw_Request (credentials
 *   redacted) and Rsponse of successful answers; details expire after LogRaw days.
 */
function callLogger(callLog: CallLog, config: Config, proxies: ProxyTrust) {
  // Server_Name follows the node id the call's request id carries (a takeover changes it).
  let namedNode = -1
  let serverName = ''
  const redacted = headerRedaction(config.log.redactHeaders ?? [])
  const digests = new AnswerDigests()
  return (exchange: Exchange, status: number, body: AnswerBody, format: string): void => {
    const request = exchange.request
    const level = logLevelOf(exchange)
    const detailed = level >= 2
    const failed = status >= 400
    const socket = request.socket
    const response = failed ? clip(bodyBytes(body).toString('utf8')) : detailed ? loggedAnswer(exchange, body) : null
    const node = nodeOfId(exchange.requestId)
    if (node !== namedNode) {
      namedNode = node
      serverName = serverNameFor(config.serverName, node)
    }
    const row: LogRow = {
      id: exchange.requestId,
      key_id: exchange.caller.anonymous ? null : exchange.caller.id,
      request_time: exchange.startedAt,
      // What the caller chose is cut to its column's width (record.ts), on every database alike.
      http_host: boundedText(request.headers.host, loggedTextMax.host),
      server_name: serverName,
      // node:net asks the socket for its address once and keeps it: no system call per call.
      server_addr: socket.localAddress ? plainAddress(socket.localAddress) : null,
      server_port: socket.localPort ?? null,
      remote_addr: boundedText(proxies.clientAddress(request), loggedTextMax.address),
      request_scheme: proxies.isSecure(request) ? 'HTTPS' : 'HTTP',
      request_method: request.method ?? 'GET',
      api_acl: exchange.acl?.id ?? null,
      api_function: exchange.mounted.route.path,
      request_url: detailed ? boundedText(request.url, loggedTextMax.requestText) : null,
      http_user_agent: detailed ? boundedText(request.headers['user-agent'], loggedTextMax.requestText) : null,
      raw_request: detailed ? rawRequest(request, exchange.rawBody, redacted) : null,
      response_code: status,
      response,
      response_format: failed ? 'text' : format,
      seconds: Math.round(performance.now() - exchange.startedTick) / 1000,
      bandwidth: (exchange.rawBody?.length ?? 0) + body.length,
      detail_until: detailed ? callLog.detailUntil(exchange.startedAt, exchange.caller.logRaw) : 0,
      signed_with: exchange.signedWith,
      response_digest: response === body && exchange.fromCache ? digests.of(response) : null,
    }
    callLog.append(row)
  }
}

/**
 * The call log as a stage: first in the pipeline, so its after phase runs last, once
 * the answer is final. Every call that got a request id is logged, and its answer
 * carries the id (D8). A full log queue makes the call wait (backpressure) instead of
 * losing its record.
 */
export function logStage(callLog: CallLog, config: Config, proxies: ProxyTrust): Stage {
  const logCall = callLogger(callLog, config, proxies)
  const record = (exchange: Exchange) => {
    const answer = exchange.answer!
    logCall(exchange, answer.status, answer.body, exchange.format)
    answer.headers.push(['x-RequestID', String(exchange.requestId)])
  }
  return {
    name: 'log',
    after(exchange) {
      if (exchange.requestId === 0) return
      const room = callLog.admit()
      if (room) return room.then(() => record(exchange))
      record(exchange)
    },
  }
}

/**
 * Before anything else (no request id yet, so nothing to log): while the database is
 * away and the log queue is full, a call is answered 503 at once. Without this it would
 * run and then wait, for the whole outage, for room for its record (the backpressure
 * of logStage), and every client would hang instead of hearing that the service is down.
 */
export function logRoomStage(callLog: CallLog): Stage {
  return {
    name: 'log-room',
    run(exchange) {
      if (callLog.refusesNewCalls()) exchange.answer = errorAnswer('Error: Service temporarily unavailable, try again shortly.', 503, [['Retry-After', '2']])
    },
  }
}
