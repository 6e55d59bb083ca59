import { ApiError } from '../errors.ts'
import type { Stage } from '../pipeline.ts'
import type { Exchange } from '../exchange.ts'

/**
 * Reads the raw body (the signature covers it) up to `limit` bytes: 413 beyond, at
 * once when Content-Length already says so. A request without a body costs nothing.
 */
export function readBodyStage(limit: number): Stage {
  const tooLarge = () => new ApiError('PAYLOAD_TOO_LARGE', `Request body is larger than ${limit} bytes.`)
  return {
    name: 'body',
    run(exchange: Exchange) {
      const request = exchange.request
      const length = request.headers['content-length']
      if (length === undefined && request.headers['transfer-encoding'] === undefined) return
      if (length !== undefined && Number(length) > limit) throw tooLarge()
      if (length === '0') return
      return new Promise<void>((resolve, reject) => {
        const chunks: Buffer[] = []
        let size = 0
        const onData = (chunk: Buffer) => {
          size += chunk.length
          if (size > limit) {
            request.off('data', onData)
            request.resume()
            reject(tooLarge())
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
