import type { Stage } from '../pipeline.ts'
import type { Exchange } from '../exchange.ts'
import { encode } from '../encoders.ts'
import { answerValue } from '../jsonText.ts'

/** Runs the plugin's handler and encodes its answer in the call's format. */
export function handleStage(): Stage {
  function finish(exchange: Exchange, result: unknown): void {
    const route = exchange.mounted.route
    exchange.result = result
    const rows = exchange.format === 'csv' && route.csv ? route.csv(answerValue(result), exchange) : undefined
    // exchange.result keeps the JSON shape (the call log stores it, D8); only the encoding is reshaped.
    const value = exchange.format === 'xml' && route.xmlValue ? route.xmlValue(answerValue(result), exchange) : result
    const encoded = encode(value, exchange.format, route, rows)
    exchange.answer = { status: encoded.status ?? 200, body: encoded.body, contentType: encoded.contentType, headers: exchange.extraHeaders }
  }
  return {
    name: 'handler',
    run(exchange) {
      const result = exchange.mounted.route.handler(exchange)
      if (result instanceof Promise) return result.then((value) => finish(exchange, value))
      finish(exchange, result)
    },
  }
}
