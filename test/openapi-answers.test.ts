/**
 * The answers in the OpenAPI document (Route.answer): every operation that answers
 * json/xml/csv gives its json answer's schema, the issue 16 fields among them (a
 * rotation's OldSecretEnds, the log record's Secret, the limits' Credits, Tenant and
 * ParentTenant, the audit record); every 401 declares WWW-Authenticate and the apiKey
 * scheme the key pattern. Then conformance: every operation with a schema is called for
 * real as the admin key (and a customer key of its making) and its answer is validated
 * with Ajv against the document's schema, so code and schema cannot drift apart.
 */
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { Ajv, type ValidateFunction } from 'ajv'
import { forEachDatabase, startService, type CallOptions, type CallResult, type Service } from './helpers/service.ts'
import { groupNamed, keyTestGroups } from './helpers/keys.ts'
import { addTestPlayer, setEntitlement } from './helpers/tenants.ts'
import { fastWebhooks, startReceiver } from './helpers/webhookReceiver.ts'
import { calendarDayAt } from '../kernel/sdk.ts'
import type { SigningKey } from '../kernel/auth/signature.ts'

type Operation = { responses: Record<string, { content?: Record<string, { schema?: any }>; headers?: Record<string, any> }> }
type Paths = Record<string, Record<string, Operation>>

const jsonSchema = (operation: Operation) => operation.responses['200'].content?.['application/json']?.schema

async function openApi(service: Service): Promise<{ paths: Paths; components: any }> {
  const answer = await service.call('GET', '/Api/Read/OpenApi', { key: null })
  if (answer.status !== 200) throw new Error(answer.text)
  return answer.json
}

t.test('the document gives every answer, the 401 header and the key pattern', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const document = await openApi(service)
  const { paths } = document
  const properties = (path: string, method = 'post') => Object.keys(jsonSchema(paths[path][method]).properties)

  const rotate = jsonSchema(paths['/Api/Rotate/Key'].post)
  t.same(rotate.required, ['Id', 'Api_Key', 'Api_Secret', 'Name', 'MaxHits', 'OldSecretEnds'], 'a rotation\'s answer, OldSecretEnds included')
  t.same(properties('/Api/Create/Key'), ['Id', 'Api_Key', 'Api_Secret', 'Name', 'MaxHits'])
  t.ok(properties('/Api/Read/Log').includes('Secret'), 'the log record names Secret')
  t.same(jsonSchema(paths['/Api/Read/Log'].post).properties.Secret.enum, ['current', 'previous', null])
  const limits = jsonSchema(paths['/Api/Read/Limits'].get)
  t.same(Object.keys(limits.properties), ['Tenant', 'ParentTenant', 'Credits'], 'the limits answer names Tenant, ParentTenant and Credits')
  t.same(Object.keys(limits.properties.Credits.properties), ['Remain', 'Refill', 'RefillDate', 'TimeLeft'])
  t.same(Object.keys(limits.additionalProperties.properties), ['Limit', 'Remain', 'ResetDate', 'TimeLeft'], 'and each window of the key')
  const audit = jsonSchema(paths['/Api/Read/Audit'].post)
  t.same(Object.keys(audit.properties), ['Total', 'Page', 'Records'])
  t.same(Object.keys(audit.properties.Records.items.properties), ['Id', 'At', 'Who', 'Parent', 'Custno', 'Action', 'KeyId', 'Before', 'After', 'RequestId'], 'the audit record')
  t.ok(Object.keys(jsonSchema(paths['/Api/Read/Keys'].get).items.properties).includes('Credits'), 'the key listing names Credits')

  const unauthorized = await service.call('GET', '/Api/Read/Acl', { key: null })
  t.equal(unauthorized.status, 401)
  for (const [path, item] of Object.entries(paths)) {
    for (const [method, operation] of Object.entries(item)) {
      const named = `${method.toUpperCase()} ${path}`
      const header = operation.responses['401'].headers?.['WWW-Authenticate']
      t.same(header?.schema, { type: 'string' }, `${named}: its 401 declares WWW-Authenticate`)
      t.equal(header?.example, unauthorized.headers.get('www-authenticate'), `${named}: as a real 401 sends it`)
      const content = operation.responses['200'].content!
      if ('application/json' in content && 'text/csv' in content) {
        t.ok(jsonSchema(operation), `${named}: a json answer with its schema`)
        t.same([content['application/xml'], content['text/csv']], [{}, {}], `${named}: xml and csv carry no JSON schema`)
      }
    }
  }
  t.ok(jsonSchema(paths['/Api/Read/Changes'].get), 'a public operation too')
  t.ok(paths['/Api/Read/OpenApi'].get.responses['200'].content!['application/json'].schema, 'this document, of its own type, too')
  t.notOk(paths['/People/Read/Photo'].get.responses['200'].content!['image/*'].schema, 'an image has none')

  const keyScheme = document.components.securitySchemes.apiKey.description
  t.match(keyScheme, '`^kg_[0-9A-Za-z]{28}$`', 'the key pattern')
  t.match(keyScheme, /CRC32/, 'and its checksum')
  t.match(keyScheme, '`^kg_[0-9A-Za-z_-]{22}$`', 'and the older keys\' pattern')
  t.match(service.admin.apiKey, /^kg_[0-9A-Za-z]{28}$/, 'a key issued now fits it')
})

/**
 * The schema with every record closed (additionalProperties false where it says nothing
 * of them): the document leaves records open, but every field the code sends must be named.
 */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed)
  if (schema === null || typeof schema !== 'object') return schema
  const copy: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(schema)) {
    copy[name] = name === 'properties' ? Object.fromEntries(Object.entries(value as object).map(([field, property]) => [field, closed(property)])) : closed(value)
  }
  if ('properties' in copy && !('additionalProperties' in copy)) copy.additionalProperties = false
  return copy
}

/** Calls an operation and validates its answer against the document's schema for it, and against that schema closed. */
function conformance(t: Test, service: Service, paths: Paths) {
  const ajv = new Ajv({ allErrors: true, allowUnionTypes: true })
  const compiled = new Map<string, [ValidateFunction, ValidateFunction]>()
  const checked = new Set<string>()
  const check = async (method: 'GET' | 'POST', path: string, options: CallOptions = {}): Promise<CallResult> => {
    const answer = await service.call(method, path, { today: true, ...options })
    const named = `${method} ${path.split('?')[0]}`
    t.equal(answer.status, 200, `${named}: ${answer.text.slice(0, 200)}`)
    const operation = paths[path.split('?')[0]]?.[method.toLowerCase()]
    const content = operation?.responses['200'].content ?? {}
    const schema = (content['application/json'] ?? Object.values(content)[0])?.schema
    if (!schema) {
      t.fail(`${named}: no answer schema in the document`)
      return answer
    }
    let validators = compiled.get(named)
    if (!validators) compiled.set(named, (validators = [ajv.compile(schema), ajv.compile(closed(schema) as object)]))
    for (const [validate, what] of [[validators[0], 'as its schema says'], [validators[1], 'no field its schema does not name']] as const) {
      const valid = validate(answer.json)
      t.ok(valid, `${named}: ${what}${valid ? '' : `: ${ajv.errorsText(validate.errors)} in ${answer.text.slice(0, 500)}`}`)
    }
    checked.add(named)
    return answer
  }
  return { check, checked }
}

t.test('every answer conforms to its schema in the document', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    const groups = await keyTestGroups(service)
    const { paths } = await openApi(service)
    const { check, checked } = conformance(t, service, paths)

    // The admin key's own reads, and the documents.
    await check('GET', '/Api/Read/Acl')
    await check('POST', '/Api/Read/Acl', { body: {} })
    await check('GET', '/Api/Read/Groups')
    await check('POST', '/Api/Read/Groups', { body: {} })
    await check('GET', '/Access/Level/List')
    await check('GET', '/Api/Read/List')
    await check('GET', '/Api/Read/Servers')
    await check('GET', '/Api/Read/Changes', { key: null })
    await check('GET', '/Api/Read/OpenApi', { key: null })
    await check('GET', '/Api/Read/Limits')

    // A webhook first, so the key changes below make deliveries.
    const webhook = await check('POST', '/Api/Create/Webhook', { body: { Url: receiver.url, Events: ['key.changed', 'key.rotated'] } })
    await check('POST', '/Api/Edit/Webhook', { body: { Id: webhook.json.Id, Secret: `whsec_${randomBytes(32).toString('base64')}` } })
    await check('POST', '/Api/Edit/Webhook', { body: { Id: webhook.json.Id, Disabled: 0 } })

    // A customer key with every kind of limit: its own window, its tenant's and its parent's quota, credits with a refill.
    await setEntitlement(service, 1, 5, { MaxHits: '1000/1Day' })
    await setEntitlement(service, 1, 0, { MaxHits: '100000/1Day' })
    const readers = [groups.aclReader, await groupNamed(service, 'Call log reader'), await groupNamed(service, 'Usage reader')]
    const created = await check('POST', '/Api/Create/Key', {
      body: { Display_Name: 'Customer 5', GroupId: readers, Require_Https: 0, Defaults: { Custno: 5 }, MaxHits: '100/1Min', Credits: 50, Refill: { Amount: 50, Every: '1Day' } },
    })
    await check('POST', '/Api/Edit/Key', { body: { KeyId: created.json.Id, AddCredits: 10, Email: 'five@example.com' } })
    const old: SigningKey = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
    const rotated = await check('POST', '/Api/Rotate/Key', { body: { KeyId: created.json.Id, OldSecretValidFor: 600 } })
    const customer: SigningKey = { apiKey: created.json.Api_Key, secret: rotated.json.Api_Secret }
    const byOldSecret = await service.call('GET', '/Api/Read/Acl', { key: old, headers: { 'x-LogLevel': '2' } })
    t.equal(byOldSecret.status, 200, byOldSecret.text)
    const record = await check('POST', '/Api/Read/Log', { key: customer, body: { LogRequestId: byOldSecret.headers.get('x-requestid') } })
    t.equal(record.json.Secret, 'previous', 'a record signed with the old secret')
    t.not(record.json.Rsponse, null, 'with its answer (LogLevel 2)')
    const limits = await check('GET', '/Api/Read/Limits', { key: customer })
    t.same(Object.keys(limits.json), ['1Min', 'Tenant', 'ParentTenant', 'Credits'], 'every member the schema describes')
    await check('POST', '/Api/Read/History', { key: customer, body: {} })
    await check('POST', '/Api/Read/Usage', { key: customer, body: {} })
    await check('POST', '/Api/Read/Usage', { body: { KeyId: created.json.Id, Range: '30d' } })
    await check('GET', '/Api/Read/Keys')
    const audit = await check('POST', '/Api/Read/Audit', { body: {} })
    t.ok(audit.json.Records.length >= 4, 'the create, edit and rotation, and the webhook\'s')
    await receiver.waitFor(1)
    const deliveries = await check('POST', '/Api/Read/Deliveries', { body: {} })
    t.ok(deliveries.json.Deliveries.length >= 1)
    await check('GET', '/Api/Read/Webhooks')

    // The account reads.
    await addTestPlayer(service, 1, 0, 'Lobby')
    await check('POST', '/account/read/user', { body: {} })
    await check('POST', '/account/read/group', { body: {} })
    await check('GET', '/account/read/license')
    const players = await check('POST', '/account/read/player', { body: {} })
    t.equal(players.json.length, 1)

    // People: someone with a birthday and a work anniversary today, in the tenant's own calendar.
    const day = calendarDayAt(Date.now(), await service.kernel.services.tenants.timeZone({ parent: 1, custno: 0 }))
    const monthDay = `${String(day.month).padStart(2, '0')}-${String(day.day).padStart(2, '0')}`
    const person = await check('POST', '/People/Update/OneChange', {
      body: { LastName: 'Lovelace', FirstName: 'Ada', Birthday: `1990-${monthDay}`, HireDate: `${day.year - 3}-${monthDay}`, DateLast: new Date().toISOString() },
    })
    await check('POST', '/People/Update/OneChange', { body: { LastName: 'Babbage', Email: 'charles@example.com' } })
    await check('POST', '/People/Update/OneChange', { body: { Id: person.json.Id, Title: 'Countess' } })
    const today = await check('GET', '/People/Read/Today')
    t.same(today.json.map((entry: { Occasion: string }) => entry.Occasion), ['Birthday', 'Anniversary'])
    await check('POST', '/People/Update/OnePhoto', { body: { Id: person.json.Id, Photo: 'https://example.com/ada.jpg' } })
    await check('GET', '/People/Read/Missing')
    const page = await check('POST', '/people/read/list', { body: { size: 1 } })
    t.type(page.json.Next, 'string', 'a page with a next one')
    await check('POST', '/people/read/list', { body: { after: page.json.Next } })
    await check('POST', '/people/read/filtered', { body: { filter: 'LastName=Lovelace' } })
    const nobody = await check('POST', '/people/read/filtered', { body: { filter: 'LastName=Nobody' } })
    t.equal(nobody.json.People, 'No people found')
    await check('POST', '/people/read/sorted?sort=-LastName', { body: {} })
    await check('GET', '/people/read/list?size=1&IncludeDeleted=1')
    await check('GET', '/people/read/filtered?filter=LastName%3DLovelace')
    await check('GET', '/people/read/sorted?sort=-LastName')
    await check('POST', '/People/Update/OneRemove', { body: { Id: person.json.Id } })
    await check('POST', '/People/Update/OneRecall', { body: { Id: person.json.Id } })
    await check('POST', '/People/Update/OneTerminate', { body: { Id: person.json.Id } })
    const started = await check('POST', '/people/update/importinit', { body: {} })
    const batch = await check('POST', '/people/update/importmass', {
      body: { ImportId: started.json.ImportId, People: [{ Source_Id: 's1', LastName: 'Imported' }, { Source_Id: 's2', LastName: 'Bad', Birthday: 'never' }] },
    })
    t.equal(batch.json.Rejected, 1, 'a rejection listed')
    await check('POST', '/people/update/importmass', { body: { ImportId: started.json.ImportId, Csv: 'Source_Id,LastName\ns3,Csv' } })
    const finished = await check('POST', '/people/update/importterm', { body: { ImportId: started.json.ImportId } })
    t.equal(finished.json.Rejections.length, 1)

    // Every operation whose answer has a schema was called and held to it.
    const declared = Object.entries(paths).flatMap(([path, item]) => Object.entries(item)
      .filter(([, operation]) => Object.values(operation.responses['200'].content ?? {}).some((content) => content.schema))
      .map(([method]) => `${method.toUpperCase()} ${path}`))
    t.same(declared.filter((operation) => !checked.has(operation)), [], 'no operation with a schema left unchecked')
  }),
)

/**
 * The document names every header an answer carries, not only its body: a listing's
 * X-Total-Count, X-Page and X-Next (D12), a photo's ETag and Cache-Control (and the
 * If-None-Match that gets a 304), X-Cache on a cached answer, Idempotent-Replayed on a
 * replayed write, the reference page's security headers.
 */
t.test('every header an answer carries is in the document', async (t) => {
  const service = await startService(t, { kind: 'sqlite', config: fastWebhooks })
  const { paths, components } = await openApi(service)
  const standard = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive', 'transfer-encoding'])
  const seen = new Set<string>()
  const declared = (path: string, method: string, status: number): Set<string> => {
    const headers = paths[path]?.[method]?.responses[String(status)]?.headers ?? {}
    return new Set(Object.keys(headers).map((name) => name.toLowerCase()))
  }
  const check = async (method: 'GET' | 'POST', path: string, options: CallOptions = {}, status = 200): Promise<CallResult> => {
    const answer = await service.call(method, path, { today: true, ...options })
    const bare = path.split('?')[0]
    t.equal(answer.status, status, `${method} ${path}: ${answer.text.slice(0, 200)}`)
    const named = declared(bare, method.toLowerCase(), answer.status)
    for (const [name] of answer.headers) {
      if (standard.has(name)) continue
      seen.add(name)
      t.ok(named.has(name), `${method} ${bare} ${answer.status}: its ${name} header is in the document`)
    }
    return answer
  }
  t.ok(components.headers['x-RequestID'], 'the shared headers are declared once')

  await check('GET', '/Api/Read/Acl')
  await check('GET', '/Api/Read/Acl')
  await check('POST', '/Api/Read/Acl', { body: {} })
  await check('POST', '/Api/Read/Acl', { body: {} })
  await check('GET', '/Api/Read/Changes', { key: null })
  await check('GET', '/Api/Read/Changes', { key: null })
  await check('GET', '/Api/Read/Changes/Rss', { key: null })
  await check('GET', '/Api/Read/OpenApi', { key: null })
  await check('GET', '/Api/Read/Reference', { key: null })
  await check('GET', '/Api/Read/Reference/reference.js', { key: null })

  // Writes, one of them replayed by its Idempotency-Key.
  const groups = await keyTestGroups(service)
  const readers = [groups.aclReader, await groupNamed(service, 'Call log reader'), await groupNamed(service, 'Usage reader')]
  const create = () => check('POST', '/Api/Create/Key', {
    body: { Display_Name: 'Limited', GroupId: readers, Require_Https: 0, MaxHits: '100/1Min' },
    date: new Date().toISOString(), headers: { 'Idempotency-Key': 'headers-1' },
  })
  const created = await create()
  const replayed = await create()
  t.equal(replayed.headers.get('idempotent-replayed'), 'true', 'a replayed write says so')
  const limited: SigningKey = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
  const limitedAcl = await check('GET', '/Api/Read/Acl', { key: limited })
  t.ok(limitedAcl.headers.get('ratelimit'), 'a key with MaxHits gets the RateLimit fields')

  // Listings: in every format, and the CSV-only totals of the other paged lists.
  for (const name of ['Babbage', 'Lovelace']) await check('POST', '/People/Update/OneChange', { body: { LastName: name } })
  for (const format of ['json', 'xml', 'csv']) {
    await check('GET', `/People/Read/Missing?size=1&format=${format}`)
    await check('GET', `/People/Read/Missing?size=1&format=${format}`)
    await check('POST', `/people/read/list?format=${format}`, { body: { size: 1 } })
    await check('POST', `/people/read/filtered?format=${format}`, { body: { filter: 'LastName=Lovelace' } })
    await check('POST', `/people/read/sorted?format=${format}&sort=-LastName`, { body: {} })
    await check('POST', `/Api/Read/History?format=${format}`, { key: limited, body: {} })
    await check('POST', `/Api/Read/Usage?format=${format}`, { key: limited, body: {} })
    await check('POST', `/Api/Read/Audit?format=${format}`, { body: {} })
    await check('POST', `/Api/Read/Deliveries?format=${format}`, { body: {} })
  }
  t.ok(seen.has('x-next'), 'a listing with a next page sends X-Next')

  // A stored photo: ETag and Cache-Control, and the 304 of If-None-Match.
  const person = await check('POST', '/People/Update/OneChange', { body: { LastName: 'Photographed' } })
  const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64')
  await check('POST', '/People/Update/OnePhoto', { body: { Id: person.json.Id, Image: png.toString('base64') } })
  const photo = await check('GET', `/People/Read/Photo?Id=${person.json.Id}`)
  await check('GET', `/People/Read/Photo?Id=${person.json.Id}`, { headers: { 'If-None-Match': photo.headers.get('etag')! } }, 304)
  const parameters = (paths['/People/Read/Photo'].get as unknown as { parameters: { name?: string; in?: string }[] }).parameters
  t.ok(parameters.some((parameter) => parameter.name === 'If-None-Match' && parameter.in === 'header'), 'the photo names If-None-Match')

  for (const name of ['x-cache', 'x-total-count', 'x-page', 'etag', 'cache-control', 'idempotent-replayed', 'content-security-policy', 'ratelimit']) {
    t.ok(seen.has(name), `${name} was sent (and so checked)`)
  }
})
