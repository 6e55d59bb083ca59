import { ApiError } from '../errors.ts'
import type { Stage } from '../pipeline.ts'
import type { Exchange } from '../exchange.ts'

/**
 * Reads the raw body (the signature covers it) up to the route's limit (config
 * `bodyLimit` unless the route declares its own): 413 beyond, at once when
 * Content-Length already says so. A request without a body costs nothing.
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
        request.once('error', reject)
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
