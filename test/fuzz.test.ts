/**
 * Property-based fuzzing of every route's JSON body and query (OWASP API8/API4): random
 * types, huge numbers, deep nesting, long strings, NUL bytes, SQL/XML/CSV injection.
 * Whatever arrives, the answer is never a 5xx, every error is a plain `Error: ...`, the
 * service keeps answering, and a refused request changes nothing in the database.
 */
import t from 'tap'
import fc from 'fast-check'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'

const nasty = fc.constantFrom(
  "'; drop table api_keys; --", '" or 1=1 --', '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>',
  '=cmd|" /C calc"!A0', '+1+1', '@SUM(1)', '\u0000', 'a\u0000b', '\uD800', '💥'.repeat(50), '../../etc/passwd', '%00', '${jndi:ldap://x}',
  '1e309', '-0', 'NaN', '9007199254740993', ' ', '',
)
const scalar = fc.oneof(
  nasty, fc.string({ maxLength: 40 }), fc.integer(), fc.double(), fc.boolean(), fc.constant(null),
  fc.constantFrom(Number.MAX_SAFE_INTEGER + 2, -1, 0, 1e308, 2 ** 63), fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map((value) => Number(value)),
)
const fieldNames = fc.constantFrom(
  'Display_Name', 'GroupId', 'KeyId', 'ApiKey', 'MaxHits', 'StartDate', 'EndDate', 'AllowHours', 'DayPass', 'Require_Https', 'ResponseFormat',
  'LogLevel', 'LogRaw', 'Defaults', 'Email', 'LogRequestId', 'page', 'size', 'sort', 'filter', 'Id', 'Photo', 'Image', 'Type', 'People',
  'Csv', 'ImportId', 'FirstName', 'LastName', 'Source_Id', 'TermDate', 'Custno', 'Parent', '__proto__', 'constructor', 'From', 'To', 'Function',
)
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  node: fc.oneof({ depthSize: 'small', withCrossShrink: true }, scalar, tie('array'), tie('object')),
  array: fc.array(tie('node'), { maxLength: 4 }),
  object: fc.dictionary(fieldNames, tie('node'), { maxKeys: 6 }),
})).node
const body = fc.oneof(fc.dictionary(fieldNames, value, { maxKeys: 8 }), value)
const query = fc.dictionary(fc.constantFrom('page', 'size', 'sort', 'filter', 'format', 'x'), fc.oneof(nasty, fc.string({ maxLength: 20 }), fc.integer().map(String)), { maxKeys: 4 })

async function snapshot(service: Service): Promise<string> {
  const db = service.kernel.database.db.withTables<{ people: { id: number } }>()
  const [keys, groups, acl, people] = await Promise.all([
    db.selectFrom('api_keys').selectAll().orderBy('id').execute(),
    db.selectFrom('api_key_groups').selectAll().orderBy('key_id').orderBy('group_id').execute(),
    db.selectFrom('api_acl').selectAll().orderBy('id').execute(),
    db.selectFrom('people').selectAll().orderBy('id').execute(),
  ])
  return JSON.stringify([keys, groups, acl, people])
}

t.test('fuzzed bodies and queries on every route', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const routes = service.kernel.routes()
    t.ok(routes.length >= 15, `${routes.length} routes mounted`)
    let calls = 0
    for (const route of routes) {
      await fc.assert(
        fc.asyncProperty(body, query, async (sentBody, sentQuery) => {
          const search = new URLSearchParams(sentQuery as Record<string, string>).toString()
          const path = route.path + (search ? `?${search}` : '')
          const before = await snapshot(service)
          const answer = await service.call(route.method, path, { body: route.method === 'POST' ? sentBody : undefined, today: true })
          calls++
          if (answer.status >= 500) throw new Error(`${route.method} ${path} ${JSON.stringify(sentBody)} -> ${answer.status} ${answer.text}`)
          if (answer.status >= 400) {
            if (!answer.text.startsWith('Error: ')) throw new Error(`${route.method} ${path}: error body '${answer.text}'`)
            if ((await snapshot(service)) !== before) throw new Error(`${route.method} ${path} ${JSON.stringify(sentBody)} was refused (${answer.status}) but changed the database`)
          }
        }),
        { numRuns: Number(process.env.FUZZ_RUNS ?? 25), seed: Number(process.env.FUZZ_SEED ?? 20261122) },
      )
    }
    t.ok(calls > 0, `${calls} fuzzed calls, none answered 5xx`)
    t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200, 'the service still answers')
  }),
)

t.test('1 MiB strings and raw junk', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    for (const route of service.kernel.routes().filter((candidate) => candidate.method === 'POST')) {
      for (const raw of ['x'.repeat(1024 * 1024 - 20), `{"Display_Name":"${'n'.repeat(1024 * 1000)}"}`, Buffer.from([0xc3, 0x28, 0xff]), '{"a":' + '['.repeat(5000) + ']'.repeat(5000) + '}']) {
        const answer = await service.call('POST', route.path, { rawBody: raw, today: true })
        t.ok(answer.status >= 400 && answer.status < 500, `${route.path}: ${answer.status}`)
        t.match(answer.text, /^Error: /)
      }
    }
  }),
)
