import type { IncomingMessage } from 'node:http'
import type { Logger } from 'pino'
import type { Exchange } from '../http/exchange.ts'
import { bodyBytes } from '../http/bodyPieces.ts'
import type { Stage } from '../http/pipeline.ts'

export type AccessMode = 'all' | 'errors' | 'none'

const maxErrorText = 200

/**
 * One pino line per answered call (`log.access`: `all`, `errors` = 4xx/5xx only, `none`).
 * Only what identifies the call: request id, method, canonical route (never the raw URL
 * or a header), status, duration, client address, key id; for an error answer its
 * `Error: ...` text (fixed texts and the caller's own input, never a secret: D6).
 */
export function accessLogStage(logger: Logger, mode: AccessMode, clientAddressOf: (request: IncomingMessage) => string): Stage {
  return {
    name: 'access-log',
    after(exchange: Exchange) {
      const answer = exchange.answer
      if (answer === null || mode === 'none') return
      const status = answer.status
      if (status < 400 && mode !== 'all') return
      const line: Record<string, unknown> = {
        requestId: exchange.requestId === 0 ? null : exchange.requestId,
        method: exchange.request.method,
        route: exchange.mounted.route.path,
        plugin: exchange.mounted.plugin,
        status,
        ms: Math.round((performance.now() - exchange.startedTick) * 1000) / 1000,
        remoteAddr: clientAddressOf(exchange.request),
        // Only a caller whose signature was verified (it has a request id) is named: a refused call only claimed a key.
        keyId: exchange.requestId === 0 || exchange.caller.anonymous ? null : exchange.caller.id,
      }
      if (status >= 400) line.error = bodyBytes(answer.body).subarray(0, maxErrorText).toString('utf8')
      if (status >= 500) logger.error(line, 'call failed')
      else if (status >= 400) logger.warn(line, 'call refused')
      else logger.info(line, 'call')
    },
  }
}
