import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'

t.test('GET /Api/Read/Acl', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const first = await service.call('GET', '/Api/Read/Acl')
    t.equal(first.status, 200)
    t.match(first.headers.get('content-type'), /^application\/json/)
    t.match(first.headers.get('x-requestid'), /^\d+$/)
    t.ok(Array.isArray(first.json))
    t.ok(first.json.some((entry: { Path: string }) => entry.Path === '/Api/Read/Acl'))
    for (const entry of first.json) t.same(Object.keys(entry), ['Path', 'Display_Name', 'Id', 'Is_Public', 'Require_Https', 'Require_Hash'])
    const second = await service.call('GET', '/Api/Read/Acl')
    t.equal(second.headers.get('x-cache'), 'HIT')
    t.not(second.headers.get('x-requestid'), first.headers.get('x-requestid'), 'a cached answer still gets its own request id')
  }),
)
