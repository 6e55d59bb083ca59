import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { createServer as createHttpsServer } from 'node:https'
import { readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import type { Config } from '../boot/config.ts'
import type { RouteTable } from './router.ts'
import { Exchange, type Answer } from './exchange.ts'
import { BodyPieces } from './bodyPieces.ts'
import { announcesBody, noRoute, type Pipelines } from './pipelines.ts'
import { errorAnswer, plainText } from './failure.ts'
import { timedOutSocket } from './stages/readBody.ts'
import { lingerMs, lingerOnClose } from './lingeringClose.ts'
import { arrivalsSettle, clusterQuietMs, freshGraceMs } from './arrivalsSettle.ts'

export interface HttpServerOptions {
  config: Config
  routes: RouteTable
  /** The pipeline for one call (chosen per request), and the one of a call no route matches. */
  pipelines: Pipelines
  clock: () => number
  report: (error: unknown) => void
  /** Answers requests outside the API (health probes) before routing; true when it did. */
  outsideBasePath?: (request: IncomingMessage, response: ServerResponse) => boolean
  /** A cluster worker's: its connections come from the primary, not from its own backlog (arrivalsSettle.ts). */
  clusterWorker?: boolean
}

export interface HttpServer {
  listen(): Promise<{ port: number; url: string }>
  /** Stops accepting and waits for calls in flight (their client gone or not). */
  close(): Promise<void>
}

function send(response: ServerResponse, answer: Answer): void {
  // A 304 describes the stored representation it stands for (RFC 9110 15.4.5): no Content-Length 0 or type of its own.
  const headers: string[] = answer.status === 304 ? [] : ['Content-Type', answer.contentType, 'Content-Length', String(answer.body.length)]
  for (const [name, value] of answer.headers) headers.push(name, value)
  response.writeHead(answer.status, headers)
  // The buffer itself: node:http sends the head and it in one writev, the body not
  // copied. As a latin1 string joined to the head it was copied on every call: 2 µs
  // more at 3 KB, 7-15 at 20 KB, about 20 at a 45 KB people page, the same at 60
  // bytes (docs/benchmarks.md, sixth session).
  const { body } = answer
  if (BodyPieces.is(body)) {
    // Pieces, likewise: corked, the head and every piece go in one writev (end() uncorks).
    response.cork()
    for (const piece of body.pieces) response.write(piece)
    response.end()
    return
  }
  response.end(body)
}

/**
 * A whole answer written on a socket node:http has let go of (a malformed request,
 * CONNECT). end() sends a FIN and the socket then waits for the client's; one that never
 * reads nor closes would hold its descriptor for ever, so it gets lingerMs to read this.
 */
function endRaw(socket: Duplex, text: string): void {
  socket.end(text)
  const timer = setTimeout(() => socket.destroy(), lingerMs).unref()
  socket.once('close', () => clearTimeout(timer))
}

const absoluteForm = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/

/** `http://host:port/v1.0/x?y` → `/v1.0/x?y`; any other target (`*`) stays as it is. */
function originForm(target: string): string {
  const authority = absoluteForm.exec(target)
  if (authority === null) return target
  const rest = target.slice(authority[0].length)
  return rest.charCodeAt(0) === 47 ? rest : `/${rest}`
}

function closesConnection(answer: Answer): boolean {
  return answer.headers.some(([name, value]) => name.toLowerCase() === 'connection' && value.toLowerCase() === 'close')
}

/** node:http (or https) in front of the pipeline: find the route, run the pipeline, send. */
export function createServer(options: HttpServerOptions): HttpServer {
  const { config, routes, pipelines, clock, report, outsideBasePath } = options
  const { pipelineFor, unrouted } = pipelines
  const basePathLength = config.basePath.length
  const basePathLower = config.basePath.toLowerCase()
  const underBasePath = (url: string) => url.startsWith(config.basePath) || url.slice(0, basePathLength).toLowerCase() === basePathLower

  // Calls still being handled: close() waits for them even when their client has gone,
  // so no handler runs on against a closed log queue or database.
  let inFlight = 0
  let allSettled: (() => void) | null = null
  // Set by close(): an answer given while draining closes its connection (Connection: close), so the
  // process need not wait for that client's keep-alive to end.
  let draining = false
  // Connections accepted and calls begun so far: close() waits while these still grow.
  let arrivals = 0

  /** `expectsContinue`: sent with `Expect: 100-continue`; node:http has not answered 100 (checkContinue below). */
  async function handle(request: IncomingMessage, response: ServerResponse, expectsContinue: boolean): Promise<void> {
    arrivals++
    // HTTP/1.1 requires Host, exactly once (RFC 9112 3.2); node:http's own refusal had
    // no body. A second Host line is joined to the first (joinDuplicateHeaders below).
    const host = request.headers.host
    const badHost = (host === undefined && request.httpVersionMinor === 1) || host?.includes(',')
    // A fragment is the client's own (RFC 9112 3.2): one sent would be signed, routed or dropped at a guess.
    if (badHost || request.url?.includes('#')) {
      response.shouldKeepAlive = false
      if (!request.complete) lingerOnClose(request)
      return send(response, errorAnswer(!badHost ? 'Error: A request target must not hold a fragment (#).' : host === undefined ? 'Error: The Host header is required.' : 'Error: The Host header must be given once.', 400))
    }
    // The absolute form (`GET http://host/v1.0/...`, RFC 9112 3.2.2, as sent through a
    // forward proxy): signed, routed and logged as its origin form, the path a client signs.
    if (request.url !== undefined && request.url.charCodeAt(0) !== 47) request.url = originForm(request.url)
    const url = request.url ?? '/'
    const queryAt = url.indexOf('?')
    // The signed path is what follows the base path as sent; a base path spelt with
    // %-escapes (which the router decodes) would leave it cut mid-escape, so it routes nowhere.
    const mounted = underBasePath(url) ? routes.find(request.method ?? 'GET', queryAt === -1 ? url : url.slice(0, queryAt)) : null
    // Only a route reads a body: a 404 (no route, a wrong method), a health probe and the
    // console's files answer without it. node:http would then drain it to keep the
    // connection, for as long as the client sends; it closes instead, what still comes
    // read and dropped within the lingering bounds, as for a refused call.
    if (mounted === null && announcesBody(request)) {
      response.shouldKeepAlive = false
      lingerOnClose(request)
    }
    if (outsideBasePath?.(request, response)) return
    const exchange = new Exchange(request, mounted ?? noRoute, basePathLength, clock())
    let continued = false
    if (expectsContinue) {
      exchange.continueBody = () => {
        if (continued) return
        continued = true
        response.writeContinue()
      }
    }
    inFlight++
    try {
      await (mounted === null ? unrouted : pipelineFor(request)).run(exchange)
      // Answered without asking for the body: the client may send it or not (RFC 9110
      // 10.1.1), so the connection cannot carry another request.
      if (draining || (expectsContinue && !continued && !request.complete)) response.shouldKeepAlive = false
      const answer = exchange.answer!
      // Answered with its body unread and the connection closing: the client may still be sending.
      if (!request.complete && (!response.shouldKeepAlive || closesConnection(answer))) lingerOnClose(request)
      send(response, answer)
    } finally {
      if (--inFlight === 0 && allSettled) allSettled()
    }
  }

  const serverOptions = {
    maxHeaderSize: config.timeouts.maxHeaderSize,
    requestTimeout: config.timeouts.requestMs,
    headersTimeout: config.timeouts.headersMs,
    keepAliveTimeout: config.timeouts.keepAliveMs,
    // Node checks the two timeouts above on this interval; the default (30 s) is too slow.
    connectionsCheckingInterval: 1000,
    // Checked in handle(), so the refusal is a plain-text Error: like every other.
    requireHostHeader: false,
    // node:http keeps the first of two Host, Content-Type or User-Agent lines and drops
    // the other; joined, a repeated one is seen (a second Host is refused, a second
    // Content-Type is no JSON type), so a smuggled line never decides quietly.
    joinDuplicateHeaders: true,
  }
  const listener = (request: IncomingMessage, response: ServerResponse, expectsContinue = false) => {
    handle(request, response, expectsContinue).catch((error) => {
      report(error)
      if (!response.headersSent) send(response, errorAnswer('Error: Internal error.', 500))
    })
  }
  const server: Server = config.tls
    ? createHttpsServer({ ...serverOptions, cert: readFileSync(config.tls.certFile), key: readFileSync(config.tls.keyFile) }, listener)
    : createHttpServer(serverOptions, listener)
  // node:http keeps the first 1,000 header lines and drops the rest without a word, so a
  // credential or X-Forwarded-* line after them would go unseen (a repeated x-apikey,
  // the line a trusted proxy appends). No count limit: maxHeaderSize bounds the headers.
  server.maxHeadersCount = 0
  // Open connections, so close() can end those with no call in flight (below).
  const connections = new Set<Duplex>()
  server.on(config.tls ? 'secureConnection' : 'connection', (socket: Duplex) => {
    connections.add(socket)
    arrivals++
    socket.once('close', () => connections.delete(socket))
  })
  // CONNECT (a tunnel) is no call of this service; without a listener node:http closes
  // the socket without a word.
  server.on('connect', (request: IncomingMessage, socket: Duplex) => {
    const message = 'Error: CONNECT is not supported.'
    endRaw(socket, `HTTP/1.1 405 Method Not Allowed\r\nContent-Type: ${plainText}\r\nContent-Length: ${Buffer.byteLength(message)}\r\nConnection: close\r\n\r\n${message}`)
  })
  // node:http would answer 100 Continue before a header is checked, inviting the upload
  // of a body an unknown key or a stale date never gets read; the body stage sends it.
  server.on('checkContinue', (request: IncomingMessage, response: ServerResponse) => listener(request, response, true))
  // Any other expectation: node:http's own 417 had no body.
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    response.shouldKeepAlive = false
    if (!request.complete) lingerOnClose(request)
    send(response, errorAnswer('Error: Expect: 100-continue is the only expectation this service meets.', 417))
  })
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy()
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
    if (status === 408) (socket as { [timedOutSocket]?: boolean })[timedOutSocket] = true
    const message = status === 431 ? 'Error: Request headers are too large.' : status === 408 ? 'Error: Request timed out.' : 'Error: Malformed HTTP request.'
    endRaw(socket, `HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : status === 408 ? 'Request Timeout' : 'Bad Request'}\r\nContent-Type: ${plainText}\r\nContent-Length: ${Buffer.byteLength(message)}\r\nConnection: close\r\n\r\n${message}`)
  })

  return {
    listen() {
      return new Promise((resolve, reject) => {
        server.once('error', reject)
        server.listen(config.port, config.host, () => {
          server.off('error', reject)
          const { port } = server.address() as AddressInfo
          const host = config.host.includes(':') ? `[${config.host}]` : config.host
          resolve({ port, url: `${config.tls ? 'https' : 'http'}://${host}:${port}${config.basePath}` })
        })
      })
    },
    async close() {
      // Stop accepting; idle keep-alive sockets close now, busy ones after their answer.
      draining = true
      // A call whose client has sent it is in flight even when this process has not taken
      // it up yet: its connection still in the listen backlog (or, with WORKERS, held by
      // the primary for this worker), or its bytes not yet read (common under load, when
      // the event loop runs behind). Closing the listener would reset the first, and ending
      // the connections without a request the second. So let the event loop accept what
      // waits and read what was sent, until nothing new comes (arrivalsSettle.ts), before
      // the listener closes.
      await arrivalsSettle(() => arrivals, options.clusterWorker ? clusterQuietMs : 0)
      await new Promise<void>((resolve) => {
        if (!server.listening) return resolve()
        server.close(() => resolve())
        server.closeIdleConnections()
        // closeIdleConnections leaves a connection that has not sent a whole request (a
        // preconnect, headers under way), and node:http's header timeout stops with
        // close(): without a call in flight (node:http's _httpMessage) it ends now. One that
        // has sent nothing yet gets freshGraceMs first: under load, one accepted just as the
        // stop began has its request on the way (its client would see a reset, not an
        // answer, for a call it sent to a connection the service took).
        const idle = (socket: Duplex) => (socket as { _httpMessage?: unknown })._httpMessage == null
        for (const socket of connections) {
          if (!idle(socket)) continue
          if ((socket as Duplex & { bytesRead?: number }).bytesRead !== 0) {
            socket.destroy()
            continue
          }
          const grace = setTimeout(() => idle(socket) && socket.destroy(), freshGraceMs)
          socket.once('close', () => clearTimeout(grace))
        }
        // In-flight calls get their time; a client that never lets go does not hold us up.
        setTimeout(() => server.closeAllConnections(), config.timeouts.requestMs).unref()
      })
      if (inFlight > 0) {
        await new Promise<void>((resolve) => {
          allSettled = resolve
          setTimeout(resolve, config.timeouts.requestMs).unref()
        })
      }
    },
  }
}
