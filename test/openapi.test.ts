/**
 * GET /Api/Read/OpenApi (D15): an OpenAPI 3.1 document of every mounted route, valid by
 * a real validator (@seriousme/openapi-schema-validator), public; every path in it
 * answers something other than 404. The reference page renders it with Swagger UI,
 * served from this service under a CSP that loads nothing from elsewhere.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { Validator } from '@seriousme/openapi-schema-validator'
import { forEachDatabase, startService } from './helpers/service.ts'
import { insertKey } from './helpers/keys.ts'

t.test('the OpenAPI document: valid 3.1, every route, the signature as security scheme, public', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const answer = await service.call('GET', '/Api/Read/OpenApi', { key: null })
    t.equal(answer.status, 200, 'public: no credentials needed')
    t.equal(answer.headers.get('content-type'), 'application/json; charset=utf-8')
    const document = answer.json
    t.equal(document.openapi, '3.1.0')
    t.same(document.servers, [{ url: '/v1.0' }])

    const validator = new Validator()
    const result = await validator.validate(structuredClone(document))
    t.same(result.errors, undefined, 'no validation errors')
    t.equal(result.valid, true, 'valid by @seriousme/openapi-schema-validator')
    t.equal(validator.version, '3.1')
    const broken = structuredClone(document)
    delete broken.info
    t.equal((await new Validator().validate(broken)).valid, false, 'the validator does refuse a broken document')

    const schemes = document.components.securitySchemes
    t.same(Object.keys(schemes).sort(), ['apiDate', 'apiHmac', 'apiKey', 'apiToday'])
    t.same([schemes.apiKey.name, schemes.apiDate.name, schemes.apiHmac.name, schemes.apiToday.name], ['x-apikey', 'x-apidate', 'x-apihmac', 'x-apitoday'])
    for (const scheme of Object.values(schemes) as { type: string; in: string }[]) t.same([scheme.type, scheme.in], ['apiKey', 'header'])
    t.match(schemes.apiKey.description, /StringToSign = METHOD \+ "\\n" \+ PATH/, 'the signature (D4) is described')

    const routes = service.kernel.services.routes()
    const operations = Object.entries(document.paths as Record<string, Record<string, any>>).flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`))
    t.same(operations.sort(), routes.map((route) => `${route.method} ${route.path}`).sort(), 'one operation per mounted route')
    const create = document.paths['/Api/Create/Key'].post
    t.same(create.security, [{ apiKey: [], apiDate: [], apiHmac: [], apiToday: [] }], 'the day code where the route needs it')
    t.same(create.requestBody.content['application/json'].schema, routes.find((route) => route.path === '/Api/Create/Key')!.body, 'the route\'s own body schema')
    t.same(document.paths['/Api/Read/Acl'].get.security, [{ apiKey: [], apiDate: [], apiHmac: [] }])
    t.same(document.paths['/Api/Read/Changes'].get.security, [{}, { apiKey: [], apiDate: [], apiHmac: [] }], 'public paths: no credentials, or signed')
    const missing = document.paths['/People/Read/Missing'].get
    t.ok(missing.parameters.some((parameter: { name: string; in: string }) => parameter.name === 'page' && parameter.in === 'query'), 'query schema properties become parameters')
    t.same(Object.keys(missing.responses['200'].content), ['application/json', 'application/xml', 'text/csv'])
    t.same(Object.keys(document.paths['/Api/Read/Changes/Rss'].get.responses['200'].content), ['application/rss+xml'])
    t.equal(create.requestBody.required, true, 'a body with required fields is required')
    t.equal(document.paths['/account/read/user'].post.requestBody.required, false, 'a body that requires nothing may be left out')
    t.equal(document.paths['/Api/Edit/Key'].post.requestBody.required, true, 'KeyId or ApiKey: an edit without a body is refused')
    t.equal(document.paths['/People/Update/OneChange'].post.requestBody.required, true, 'Id or LastName')
    t.equal(document.paths['/people/read/filtered'].post.requestBody.required, false, 'the filter may come in the query string')
    t.same(Object.keys(document.paths['/Api/Edit/Key'].post.responses), ['200', '400', '401', '403', '404', '406', '409', '413', '415', '417', '422', '429', '503'], 'the statuses D6 gives a write, and Idempotency-Key\'s and Expect\'s')
    t.same(Object.keys(document.paths['/Api/Read/History'].post.responses), ['200', '400', '401', '403', '404', '406', '413', '415', '417', '429', '503'], 'a read with a body: no Idempotency-Key')
    const idempotency = (operation: { parameters: { name: string; in: string }[] }) => operation.parameters.some((parameter) => parameter.name === 'Idempotency-Key' && parameter.in === 'header')
    t.ok(idempotency(document.paths['/Api/Edit/Key'].post), 'a write declares Idempotency-Key')
    t.notOk(idempotency(document.paths['/Api/Read/History'].post), 'a read does not')
    t.equal(document.info.version, JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version, "the service's version")
    t.same(Object.keys(document.paths['/People/Read/Photo'].get.responses), ['200', '304', '400', '401', '403', '404', '406', '413', '417', '429', '503'], 'an image with its ETag: 304')
    t.notOk('304' in document.paths['/Api/Read/Changes/Rss'].get.responses, 'no 304 for a raw answer without an ETag')
    // A wildcard-covered route is named by its plugin, not by the wildcard's text.
    t.equal(document.paths['/People/Read/Today'].get.summary, "Today's birthdays and work anniversaries in your tenant's time zone")
    t.equal(document.paths['/account/read/license'].get.summary, "Your tenant's maxima and what it uses")

    // A detailed log (level 2) keeps a raw answer's type and size, not its bytes.
    const logged = await service.call('GET', '/Api/Read/OpenApi', { headers: { 'x-LogLevel': '2' } })
    t.equal(logged.status, 200)
    const record = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: logged.headers.get('x-requestid') } })
    t.equal(record.status, 200, record.text)
    t.same(typeof record.json.Rsponse === 'string' ? JSON.parse(record.json.Rsponse) : record.json.Rsponse, { Status: 200, ContentType: 'application/json; charset=utf-8', Bytes: Buffer.byteLength(logged.text) })

    // The headers of D7 and D8, declared once under components and referenced everywhere.
    const resolve = (value: { $ref?: string }) => {
      if (value.$ref === undefined) return value
      t.match(value.$ref, /^#\/components\//)
      return value.$ref.slice(2).split('/').reduce((node: any, name) => node?.[name], document)
    }
    const logLevel = document.components.parameters['x-LogLevel']
    t.same([logLevel.name, logLevel.in, logLevel.required, logLevel.schema.type], ['x-LogLevel', 'header', false, 'integer'])
    for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, any>>)) {
      for (const [method, operation] of Object.entries(item)) {
        const named = `${method.toUpperCase()} ${path}`
        const parameters = operation.parameters.map(resolve)
        t.ok(parameters.some((parameter: { name: string; in: string }) => parameter.name === 'x-LogLevel' && parameter.in === 'header'), `${named}: x-LogLevel`)
        const headers = (status: string) => Object.fromEntries(Object.entries(operation.responses[status].headers ?? {}).map(([name, header]) => [name, resolve(header as object)]))
        for (const status of Object.keys(operation.responses).filter((status) => status !== '417')) {
          t.ok(headers(status)['x-RequestID']?.schema, `${named}: its ${status} declares x-RequestID`)
        }
        t.same(Object.keys(headers('429')).sort(), ['RateLimit', 'RateLimit-Policy', 'Retry-After', 'x-RequestID'], `${named}: its 429`)
        // Beside these, a 200 names what its route or the kernel adds (openapi-answers.test.ts holds each to what is sent).
        t.same(Object.keys(headers('200')).filter((name) => name in document.components.headers).sort(), ['RateLimit', 'RateLimit-Policy', 'x-RequestID'], `${named}: its 200`)
        t.ok(headers('503')['Retry-After'], `${named}: its 503 says when to try again`)
        t.notOk(operation.responses['417'].headers, `${named}: a 417 is answered before the call has an id`)
      }
    }
    // What a real call of a key with MaxHits sends, by the names the document declares.
    const limited = await insertKey(service, { display_name: 'Limited', max_hits: '2/1Min' })
    // The shared headers, sent on every such answer (X-Cache only on a cache hit).
    const declared = (status: string) => Object.keys(document.paths['/Api/Read/Acl'].get.responses[status].headers).filter((name) => name in document.components.headers)
    const first = await service.call('GET', '/Api/Read/Acl', { key: limited, headers: { 'x-LogLevel': '2' } })
    t.equal(first.status, 200)
    t.equal(first.headers.get('ratelimit-policy'), document.components.headers['RateLimit-Policy'].example.replace('q=3', 'q=2'), 'as the example spells it')
    const detailed = await service.call('POST', '/Api/Read/Log', { key: limited, body: { LogRequestId: first.headers.get('x-requestid') } })
    t.equal(detailed.status, 200, detailed.text)
    t.not(detailed.json.Rsponse, null, 'x-LogLevel 2 gave the call a detailed record')
    const refused = await service.call('GET', '/Api/Read/Acl', { key: limited })
    t.equal(refused.status, 429)
    for (const call of [first, detailed, refused]) {
      for (const name of declared(String(call.status))) t.ok(call.headers.get(name), `a real ${call.status} sends ${name}: ${call.headers.get(name)}`)
    }

    // Every path answers; a wrong body or a missing day code is a 400/401, never a 404.
    for (const operation of operations) {
      const [method, path] = operation.split(' ')
      const called = await service.call(method, path, method === 'POST' ? { body: {} } : {})
      t.not(called.status, 404, `${operation} answers ${called.status}`)
      t.not(called.status, 500, `${operation} does not fail`)
    }
  }),
)

t.test('the reference page: Swagger UI from this service, nothing from elsewhere', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const page = await service.call('GET', '/Api/Read/Reference', { key: null })
    t.equal(page.status, 200)
    t.equal(page.headers.get('content-type'), 'text/html; charset=utf-8')
    const csp = page.headers.get('content-security-policy')!
    t.match(csp, /default-src 'none'/)
    t.match(csp, /script-src 'self'(;|$)/)
    t.match(csp, /connect-src 'self'(;|$)/)
    t.notMatch(csp, /unsafe-inline|unsafe-eval|https?:/)
    t.notMatch(page.text, /https?:\/\//, 'no absolute URL in the page')
    t.notMatch(page.text, /<script>|<style|style=/, 'no inline script or style')

    const sources = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1])
    t.same(sources, ['Reference/swagger-ui.css', 'Reference/swagger-ui-bundle.js', 'Reference/reference.js'])
    const types: Record<string, RegExp> = { css: /^text\/css/, js: /^text\/javascript/ }
    for (const source of sources) {
      const file = await service.call('GET', `/Api/Read/${source}`, { key: null })
      t.equal(file.status, 200, source)
      t.match(file.headers.get('content-type'), types[source.slice(source.lastIndexOf('.') + 1)], `${source} content type`)
      t.ok(file.text.length > 0)
    }
    const bundle = await service.call('GET', '/Api/Read/Reference/swagger-ui-bundle.js', { key: null })
    t.match(bundle.text, /SwaggerUIBundle/, 'the renderer from swagger-ui-dist')
    const starter = await service.call('GET', '/Api/Read/Reference/reference.js', { key: null })
    t.match(starter.text, /url: 'OpenApi'/, 'renders this service\'s document')
    t.match(starter.text, /validatorUrl: null/, 'and never sends it to validator.swagger.io')
    t.notMatch(starter.text, /https?:\/\//)
  }),
)
