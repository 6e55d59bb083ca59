import { ApiError } from '../errors.ts'
import type { Stage } from '../pipeline.ts'
import type { Exchange } from '../exchange.ts'

/** Set on a socket the server answered 408 (its body took longer than `timeouts.requestMs`). */
export const timedOutSocket = Symbol('keygate.timedOutSocket')

/**
 * The body stopped coming: the client closed the connection, or the server cut it off
 * at its time limit. The client's doing, never a store outage (an ECONNRESET of the
 * request would otherwise read as the database's); the log record says which.
 */
function unfinishedBody(request: Exchange['request']): ApiError {
  return (request.socket as { [timedOutSocket]?: boolean })[timedOutSocket]
    ? new ApiError('REQUEST_TIMEOUT', 'Request timed out.')
    : new ApiError('BAD_REQUEST', 'The client closed the connection before the request body was complete.')
}

/**
 * Reads the raw body (the signature covers it) up to the route's limit (config
 * `bodyLimit` unless the route declares its own): 413 beyond, at once when
 * Content-Length already says so. A request without a body costs nothing. A client
 * that sent `Expect: 100-continue` gets its 100 Continue here, once every check from
 * the headers has passed.
 */
export function readBodyStage(defaultLimit: number): Stage {
  const tooLarge = (limit: number) => new ApiError('PAYLOAD_TOO_LARGE', `Request body is larger than ${limit} bytes.`)
  return {
    name: 'body',
    run(exchange: Exchange) {
      const limit = exchange.mounted.route.bodyLimit ?? defaultLimit
      const request = exchange.request
      const length = request.headers['content-length']
      if (length === undefined && request.headers['transfer-encoding'] === undefined) return
      if (length !== undefined && Number(length) > limit) throw tooLarge(limit)
      if (length === '0') return
      exchange.continueBody?.()
      return new Promise<void>((resolve, reject) => {
        const chunks: Buffer[] = []
        let size = 0
        const onData = (chunk: Buffer) => {
          size += chunk.length
          if (size > limit) {
            request.off('data', onData)
            request.resume()
            reject(tooLarge(limit))
            return
          }
          chunks.push(chunk)
        }
        request.on('data', onData)
        request.once('end', () => {
          exchange.rawBody = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)
          resolve()
        })
        request.once('error', () => reject(unfinishedBody(request)))
      })
    },
  }
}

/**
 * A call refused before its announced body was read (unknown key, stale date, ACL, 413)
 * closes its connection: the body is never read into memory, and a connection with an
 * unread body cannot carry another request.
 */
export function closeUnreadStage(): Stage {
  return {
    name: 'close-unread',
    after(exchange) {
      if (!exchange.request.complete) exchange.answer!.headers.push(['Connection', 'close'])
    },
  }
}
