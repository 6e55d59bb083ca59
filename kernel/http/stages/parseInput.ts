import type { Stage } from '../pipeline.ts'
import type { Exchange } from '../exchange.ts'
import { ApiError, badRequest } from '../errors.ts'
import { acceptsType, chooseFormat } from '../encoders.ts'
import { describeSchemaError } from '../schemaErrors.ts'

const jsonType = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i

/**
 * The body is read as UTF-8, so a Content-Type naming another charset is refused, not
 * misread. Parameter names and the value are case-insensitive and the value may be
 * quoted (RFC 9110 5.6.6, 8.3.1); empty parameters (`application/json;;`) are allowed
 * by that grammar, and parameters other than charset are ignored.
 */
function namesOnlyUtf8(contentType: string): boolean {
  for (const parameter of contentType.split(';').slice(1)) {
    const equals = parameter.indexOf('=')
    if (equals === -1 || parameter.slice(0, equals).trim().toLowerCase() !== 'charset') continue
    let value = parameter.slice(equals + 1).trim()
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1)
    if (value.toLowerCase() !== 'utf-8') return false
  }
  return true
}

/** Response format, query parameters and JSON body: 400/415 for what does not fit the route. */
export function parseInputStage(): Stage {
  return {
    name: 'input',
    run(exchange) {
      const { route } = exchange.mounted
      const params = exchange.queryString === '' ? null : new URLSearchParams(exchange.queryString)
      const query: Record<string, unknown> = {}
      let format: string | undefined
      if (params) {
        for (const [name, value] of params) {
          if (name === 'format' ? format !== undefined : Object.hasOwn(query, name)) throw badRequest(`Query parameter ${name} is given more than once.`)
          if (name === 'format') format = value
          // '__proto__' as a plain assignment would set the prototype, not a parameter the schema refuses.
          else if (name === '__proto__') Object.defineProperty(query, name, { value, enumerable: true, writable: true, configurable: true })
          else query[name] = value
        }
      }
      const { accept } = exchange.request.headers
      let chosen: ReturnType<typeof chooseFormat>
      try {
        chosen = chooseFormat(format, accept, exchange.caller.responseFormat)
      } catch (error) {
        // A route of its own type (feed, page, photo) answers that type: refused only when the header refuses it too.
        if (!(error instanceof ApiError && error.code === 'NOT_ACCEPTABLE' && route.rawContentType && accept !== undefined && acceptsType(accept, route.rawContentType))) throw error
        chosen = exchange.caller.responseFormat
      }
      if (chosen === null) throw badRequest('format must be one of json, xml, csv.')
      exchange.format = chosen
      // Who may call it first: a caller the route refuses learns nothing from its input's checks.
      if (route.permit) return route.permit(exchange.caller).then(() => checkInput(exchange, query))
      checkInput(exchange, query)
    },
  }
}

/** The query parameters and the JSON body, against the route's schemas. */
function checkInput(exchange: Exchange, query: Record<string, unknown>): void {
  const { validateBody, validateQuery } = exchange.mounted
  if (validateQuery) {
    if (!validateQuery(query)) throw badRequest(describeSchemaError(validateQuery.errors![0], 'query'))
  }
  exchange.query = query

  const raw = exchange.rawBody
  // A compressed body read as JSON would be garbage or, worse, valid by chance (RFC 9110 8.4.1: 415).
  const encoding = exchange.request.headers['content-encoding']
  if (raw !== undefined && raw.length > 0 && encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'The body must be sent without Content-Encoding; compressed bodies are not accepted.')
  }
  if (!validateBody) return
  let body: unknown = {}
  if (raw !== undefined && raw.length > 0) {
    const contentType = exchange.request.headers['content-type']
    if (contentType === undefined || !jsonType.test(contentType)) {
      throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'The body must be JSON, sent with Content-Type: application/json.')
    }
    if (!namesOnlyUtf8(contentType)) throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'The body must be JSON in UTF-8: Content-Type may name no charset but utf-8.')
    const text = raw.toString('utf8')
    if (text.includes('\uFFFD') && !raw.equals(Buffer.from(text, 'utf8'))) throw badRequest('The body is not valid UTF-8.')
    try {
      body = JSON.parse(text)
    } catch {
      throw badRequest('The body is not valid JSON.')
    }
  }
  if (!validateBody(body)) throw badRequest(describeSchemaError(validateBody.errors![0], 'body'))
  exchange.body = body
}
