/**
 * POST /Api/Read/Acl (D14): the same answer as GET /Api/Read/Acl, with an empty JSON
 * object or no body; covered by the same ACL entry; cached in the key's partition, so
 * an edit of the key shows on the very next POST.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'
import { groupNamed, insertKey } from './helpers/keys.ts'

t.test('POST /Api/Read/Acl answers what GET does, in json, xml and csv', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    for (const format of ['json', 'xml', 'csv']) {
      const viaGet = await service.call('GET', `/Api/Read/Acl?format=${format}`)
      const withoutBody = await service.call('POST', `/Api/Read/Acl?format=${format}`)
      const withEmptyObject = await service.call('POST', `/api/read/acl?format=${format}`, { body: {} })
      t.equal(viaGet.status, 200)
      for (const answer of [withoutBody, withEmptyObject]) {
        t.equal(answer.status, 200, `${format}`)
        t.equal(answer.headers.get('content-type'), viaGet.headers.get('content-type'))
        t.equal(answer.text, viaGet.text, `the same ${format} answer`)
      }
    }
    const entries = (await service.call('POST', '/Api/Read/Acl')).json
    t.ok(entries.some((entry: { Path: string }) => entry.Path === '/Api/Read/Acl'))
    for (const entry of entries) t.same(Object.keys(entry), ['Path', 'Display_Name', 'Id', 'Is_Public', 'Require_Https', 'Require_Hash'])
  }),
)

t.test('POST /Api/Read/Acl takes no parameters', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const cases: [string, string | undefined, number, string][] = [
      ['{"Path":"/x"}', 'application/json', 400, 'Error: Path is not a known field.'],
      ['[]', 'application/json', 400, 'Error: body must be an object.'],
      ['{', 'application/json', 400, 'Error: The body is not valid JSON.'],
      ['Path=/x', 'application/x-www-form-urlencoded', 415, 'Error: The body must be JSON, sent with Content-Type: application/json.'],
    ]
    for (const [rawBody, contentType, status, text] of cases) {
      const answer = await service.call('POST', '/Api/Read/Acl', { rawBody, contentType })
      t.equal(answer.status, status, rawBody)
      t.equal(answer.text, text)
    }
  }),
)

t.test('the ACL entry covers both methods; an edit of the key drops the cached POST answer', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const aclReader = await groupNamed(service, 'Access list reader')
    const logReader = await groupNamed(service, 'Call log reader')
    const key = await insertKey(service, { created_by: service.admin.id }, [aclReader])
    // Every key's ACL also lists the public entries (the api plugin's public documents).
    const publicPaths = ['/Api/Read/Changes', '/Api/Read/Changes/Rss', '/Api/Read/OpenApi', '/Api/Read/Reference', '/Api/Read/Reference/*']
    const paths = (answer: { json: { Path: string }[] }) => answer.json.map((entry) => entry.Path).filter((path) => !publicPaths.includes(path)).sort()

    const first = await service.call('POST', '/Api/Read/Acl', { key, body: {} })
    t.equal(first.status, 200)
    t.same(paths(first), ['/Api/Read/Acl'])
    t.same(first.json.map((entry: { Path: string }) => entry.Path).filter((path: string) => publicPaths.includes(path)).sort(), publicPaths)
    t.equal(first.headers.get('x-cache'), null)
    const second = await service.call('POST', '/Api/Read/Acl', { key, body: {} })
    t.equal(second.headers.get('x-cache'), 'HIT', 'cached for the key')
    t.same(paths(second), ['/Api/Read/Acl'])

    const edited = await service.call('POST', '/Api/Edit/Key', { body: { KeyId: key.id, GroupId: [aclReader, logReader] }, today: true })
    t.equal(edited.status, 200)
    const after = await service.call('POST', '/Api/Read/Acl', { key, body: {} })
    t.equal(after.headers.get('x-cache'), null, 'the edit dropped the cached answer')
    t.same(paths(after), ['/Api/Read/Acl', '/Api/Read/History', '/Api/Read/Limits', '/Api/Read/Log'])

    const outsider = await insertKey(service, {}, [logReader])
    const refused = await service.call('POST', '/Api/Read/Acl', { key: outsider })
    t.equal(refused.status, 403)
    t.equal(refused.text, 'Error: Your ACL does not allow /Api/Read/Acl.')
  }),
)
