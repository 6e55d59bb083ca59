import { RawAnswer, defineRoute, type KernelServices, type MountedRouteInfo } from '../../kernel/sdk.ts'
import { openApiAnswerSchema } from './schemas.ts'

export const openApiContentType = 'application/json; charset=utf-8'

const signature = [
  'Every call that is not public is signed (keygate D2-D5). Send the four items as headers',
  '(`x-apikey`, `x-apidate`, `x-apihmac`, and `x-apitoday` where needed) or as',
  '`Authorization: <item> <value>` lines.',
  '',
  '```',
  'StringToSign = METHOD + "\\n" + PATH + "\\n" + XAPIDATE + "\\n" + hex(sha256(BODY))',
  'x-apihmac    = lowercase hex( HMAC( key = Api_Secret, StringToSign ) )',
  '```',
  '',
  'PATH is the path after the base path with the query string exactly as sent; XAPIDATE the',
  '`x-apidate` value byte for byte (an HTTP-date or RFC 3339 UTC, within the key\'s AllowHours,',
  'default 5 minutes); BODY the raw body bytes. The HMAC hash is the one Require_Hash names',
  '(1 md5, 2 sha1, 3 sha256, 4 sha384, 5 sha512; 0 = any of them).',
].join('\n')

/** docs/keys.md, "Key strings and secret scanners". */
const keyPattern = [
  'Keys issued now are `kg_` and 28 base62 characters (`^kg_[0-9A-Za-z]{28}$`): 22 of 128 random bits, then 6 that are',
  'the CRC32 (zlib, IEEE) of the 25 characters before them in base62 (`0-9A-Za-z`), left-padded with `0`; a key whose',
  'checksum does not match is refused with 401 before any lookup. Keys issued by earlier versions are `kg_` and 22 base64url',
  'characters (`^kg_[0-9A-Za-z_-]{22}$`) and keep working.',
].join('\n')

const securitySchemes = {
  apiKey: { type: 'apiKey', in: 'header', name: 'x-apikey', description: 'The key\'s Api_Key.\n\n' + keyPattern + '\n\n' + signature },
  apiDate: { type: 'apiKey', in: 'header', name: 'x-apidate', description: 'The time of the call, signed: an HTTP-date (`Sun, 22 Nov 2026 08:49:37 GMT`) or RFC 3339 UTC.' },
  apiHmac: { type: 'apiKey', in: 'header', name: 'x-apihmac', description: 'The signature: lowercase hex HMAC of StringToSign with the key\'s Api_Secret (see apiKey).' },
  apiToday: { type: 'apiKey', in: 'header', name: 'x-apitoday', description: 'The day code: RFC 6238 TOTP, HMAC-SHA-1, 8 digits, a 4-hour step. Needed where the operation says so, and on every call of a key with DayPass 1.' },
}

/*
 * The headers every operation shares (D7, D8), declared once under components and
 * referenced by each answer: written out per answer they would multiply the document.
 */
const ref = (kind: 'headers' | 'parameters', name: string) => ({ $ref: `#/components/${kind}/${name}` })

const logLevelParameter = {
  name: 'x-LogLevel',
  in: 'header',
  required: false,
  description: 'The log level of this call (D8), instead of the key\'s LogLevel: 0 minimal, 1 medium, 2 and above full details (levels above 2 act as 2). '
    + 'A value that is not a whole number is ignored, not refused. Read the record with `POST /Api/Read/Log` and this call\'s x-RequestID.',
  schema: { type: 'integer', minimum: 0 },
}

const sharedHeaders = {
  'x-RequestID': {
    description: 'The id of this call\'s log record (D8; `POST /Api/Read/Log` with `LogRequestId`). Sent on every answer of a call that passed authentication '
      + '(or was admitted to a public operation without credentials); a call refused before that has none (a wrong key, date, signature or day code; for a call with a body also a 403 or 413 given before the body is read).',
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
  'Retry-After': {
    description: 'Seconds until a call may pass again: the spent MaxHits window or tenant quota (D7), the day-code block, the credits\' refill, '
      + 'or 2 when the database is unreachable. A key out of credits with no Refill gets none.',
    schema: { type: 'integer', minimum: 1 },
  },
  'RateLimit-Policy': {
    description: 'Sent when the key has MaxHits or its tenant a MaxHits quota (D7, draft-ietf-httpapi-ratelimit-headers): the tightest window\'s policy, '
      + 'q its quota, w its length in seconds (a tenant window is named `"tenant-<window>"`). Other answers of such a key\'s authenticated calls carry it too.',
    schema: { type: 'string' },
    example: '"1Min";q=3;w=60',
  },
  'RateLimit': {
    description: 'Sent with RateLimit-Policy: r the calls left in that window, t the seconds until it resets.',
    schema: { type: 'string' },
    example: '"1Min";r=2;t=41',
  },
}

const requestIdHeader = { 'x-RequestID': ref('headers', 'x-RequestID') }
const rateLimitHeaders = { 'RateLimit-Policy': ref('headers', 'RateLimit-Policy'), RateLimit: ref('headers', 'RateLimit') }
const retryHeaders = { 'Retry-After': ref('headers', 'Retry-After') }
/** Sent by the kernel's stages (kernel/http/stages/cache.ts, idempotency.ts), not by the route. */
const cacheHeader = { 'X-Cache': { description: '`HIT` when the answer came from the response cache (the route\'s cache time, per caller and parameters); absent otherwise.', schema: { type: 'string', enum: ['HIT'] } } }
const replayedHeader = { 'Idempotent-Replayed': { description: '`true` when the answer is the stored first answer of an earlier call with the same Idempotency-Key.', schema: { type: 'string', enum: ['true'] } } }
const ifNoneMatchParameter = { name: 'If-None-Match', in: 'header', required: false, description: 'An ETag of an earlier answer: 304 with no body while it still names the current one.', schema: { type: 'string' } }

const errorAnswer = (description: string, headers: Record<string, object> = requestIdHeader) => ({
  description,
  ...(Object.keys(headers).length > 0 ? { headers } : {}),
  content: { 'text/plain': { schema: { type: 'string', pattern: '^Error: ' } } },
})

/** docs/keys.md, "How a 401 says how to authenticate": every 401 carries it (kernel/http/failure.ts). */
const wwwAuthenticate = 'KeygateHMAC realm="keygate", items="x-apikey x-apidate x-apihmac x-apitoday"'

const unauthorized = {
  ...errorAnswer('Authentication failed; the body says what was wrong.'),
  headers: {
    // A replayed write is refused after its signature is verified: it has a request id.
    ...requestIdHeader,
    'WWW-Authenticate': {
      description: `The scheme and the credential items a signed call sends: \`${wwwAuthenticate}\`.`,
      schema: { type: 'string' },
      example: wwwAuthenticate,
    },
  },
}

/** The headers of a route's 200 that its 304 carries too (RFC 9110, 15.4.5: those a cache updates). */
function notModifiedHeaders(route: MountedRouteInfo): Record<string, object> {
  return Object.fromEntries(Object.entries(route.answerHeaders).filter(([name]) => ['etag', 'cache-control', 'expires', 'vary', 'content-location'].includes(name.toLowerCase())))
}

/**
 * The 200 of a route: its `answer` schema for the json format (or for its own content,
 * where the route answers one fixed type); xml and csv carry the same fields.
 */
function answered(route: MountedRouteInfo, cachesAnswers: boolean): object {
  const described = route.answer === null ? {} : { schema: route.answer }
  const headers = {
    ...requestIdHeader,
    ...rateLimitHeaders,
    ...(cachesAnswers && route.cacheSeconds > 0 ? cacheHeader : {}),
    ...(route.writes ? replayedHeader : {}),
    ...route.answerHeaders,
  }
  if (route.rawContentType !== null) return { description: 'The answer.', headers, content: { [route.rawContentType.split(';')[0]]: described } }
  return {
    description: 'The answer, in the format asked for. The JSON schema is the json answer\'s; XML and CSV carry the same fields (a list: one element or row per record).',
    headers,
    content: { 'application/json': described, 'application/xml': {}, 'text/csv': {} },
  }
}

const formatParameter = {
  name: 'format',
  in: 'query',
  required: false,
  description: 'The answer\'s format, overriding the key\'s ResponseFormat and the Accept header.',
  schema: { type: 'string', enum: ['json', 'xml', 'csv'] },
}

/** `get_Api_Read_List`: unique, since method and path together are (case-insensitively). */
function operationId(route: MountedRouteInfo): string {
  return `${route.method.toLowerCase()}${route.path.replace(/[^A-Za-z0-9]+/g, '_')}`
}

const idempotencyParameter = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description: 'The same key with the same request within 24 hours answers the first 2xx answer again (`Idempotent-Replayed: true`) without doing the work twice.',
  schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
}

function queryParameters(schema: object | null): object[] {
  const { properties = {}, required = [] } = (schema ?? {}) as { properties?: Record<string, object>; required?: string[] }
  return Object.entries(properties).map(([name, property]) => ({ name, in: 'query', required: required.includes(name), schema: property }))
}

function operation(route: MountedRouteInfo, cachesAnswers: boolean): object {
  const signed: Record<string, string[]> = { apiKey: [], apiDate: [], apiHmac: [] }
  if (route.dayCode) signed.apiToday = []
  return {
    operationId: operationId(route),
    summary: route.summary ?? `${route.method} ${route.path}`,
    description: [
      `Plugin \`${route.plugin}\`.`,
      route.dayCode ? 'Needs the day code (x-apitoday).' : '',
      cachesAnswers && route.cacheSeconds > 0 ? `Answers are cached ${route.cacheSeconds} seconds.` : '',
      route.publicByDefault ? 'Public by default: callable without credentials.' : '',
    ].filter(Boolean).join(' '),
    tags: [route.plugin],
    // Public by default: no credentials, or a signed call (an operator may change either).
    security: route.publicByDefault ? [{}, signed] : [signed],
    parameters: [...(route.rawContentType === null ? [formatParameter] : []), ...queryParameters(route.query), ...(route.writes ? [idempotencyParameter] : []), ...(route.etag ? [ifNoneMatchParameter] : []), ref('parameters', 'x-LogLevel')],
    // A body may be left out where the route takes none as {} (POST /account/read/user).
    ...(route.body === null ? {} : { requestBody: { required: route.bodyRequired, content: { 'application/json': { schema: route.body } } } }),
    // Every status D6 gives a call of this kind: 304 where the answer carries an ETag, 415 where there is a body.
    responses: {
      200: answered(route, cachesAnswers),
      ...(route.etag ? { 304: { description: 'Not modified: If-None-Match named the current ETag.', headers: { ...requestIdHeader, ...notModifiedHeaders(route) } } } : {}),
      400: errorAnswer('Invalid JSON, query or body.'),
      401: unauthorized,
      403: errorAnswer('The ACL does not allow this path, or HTTPS is required.'),
      404: errorAnswer('No such object of yours (an id not found, or another tenant\'s), or the route\'s plugin is disabled.'),
      406: errorAnswer('The Accept header refuses every format of this service (json, xml, csv).'),
      ...(route.writes ? {
        409: errorAnswer('A call with this Idempotency-Key is still being processed (try again shortly), or its first call may have been carried out while the database stopped answering (check, then use a new key).'),
      } : {}),
      // Any call may carry a body over the limit (a GET's body is otherwise not read).
      413: errorAnswer('The body is over the limit (bodyLimit).'),
      ...(route.body === null ? {} : { 415: errorAnswer('The body is not JSON (Content-Type).') }),
      // Answered before the call is looked at: no request id.
      417: errorAnswer('An Expect header other than 100-continue.', {}),
      ...(route.writes ? {
        422: errorAnswer('This Idempotency-Key was already used with another request.'),
      } : {}),
      429: errorAnswer('Rate limit exceeded (MaxHits or the tenant\'s quota), too many wrong day codes, or no credits left.', { ...requestIdHeader, ...retryHeaders, ...rateLimitHeaders }),
      503: errorAnswer('The database is unreachable; try again.', { ...requestIdHeader, ...retryHeaders }),
    },
  }
}

/** The OpenAPI 3.1 document of every mounted route (D15), from the routes' own schemas. */
export function openApiDocument(routes: readonly MountedRouteInfo[], version: string, basePath: string, cachesAnswers: boolean): object {
  const paths: Record<string, Record<string, object>> = {}
  for (const route of routes) {
    paths[route.path] ??= {}
    paths[route.path][route.method.toLowerCase()] = operation(route, cachesAnswers)
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'keygate',
      // The service's version: a plugin's change history may name versions of its own.
      version,
      description: 'API keys, ACL groups, signed calls, rate limits, call logs and a people directory. Paths match case-insensitively. Every error is plain text starting `Error: `.\n\n' + signature,
    },
    servers: [{ url: basePath }],
    tags: [...new Set(routes.map((route) => route.plugin))].map((name) => ({ name })),
    paths,
    components: { securitySchemes, parameters: { 'x-LogLevel': logLevelParameter }, headers: sharedHeaders },
  }
}

/** GET /Api/Read/OpenApi: public; built on the first call (every plugin's routes are mounted by then) and kept. */
export function openApiRoutes(kernel: KernelServices) {
  let document: Buffer | null = null
  return [
    defineRoute({
      method: 'GET',
      path: '/Api/Read/OpenApi',
      xml: { root: 'OpenApi' },
      rawContentType: openApiContentType,
      answer: openApiAnswerSchema,
      handler: () => {
        document ??= Buffer.from(JSON.stringify(openApiDocument(kernel.routes(), kernel.version, kernel.config.basePath, kernel.config.cache.responses)))
        return new RawAnswer(openApiContentType, document)
      },
    }),
  ]
}
