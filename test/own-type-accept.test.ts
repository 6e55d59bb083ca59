/**
 * A route of its own content type (RSS feed, reference page, OpenAPI document) and the
 * Accept header: an Accept that names that type, even one that refuses json, xml and csv
 * (`application/rss+xml, *\/*;q=0`), gets the answer; 406 only when the route's own type
 * is refused too (RFC 9110 12.5.1).
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'

t.test('an Accept naming a route’s own type is not refused', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const answered: [string, string, string][] = [
      ['/Api/Read/Changes/Rss', 'application/rss+xml, */*;q=0', 'application/rss+xml'],
      ['/Api/Read/Changes/Rss', 'application/*, application/json;q=0, application/xml;q=0, text/csv;q=0', 'application/rss+xml'],
      ['/Api/Read/Reference', 'text/html, */*;q=0', 'text/html'],
      ['/Api/Read/Reference/swagger-ui.css', 'text/css;q=0.5, */*;q=0', 'text/css'],
      ['/Api/Read/OpenApi', 'application/json, */*;q=0', 'application/json'],
    ]
    for (const [path, accept, type] of answered) {
      const answer = await service.call('GET', path, { headers: { accept } })
      t.equal(answer.status, 200, `${path} with Accept ${accept}: ${answer.text.slice(0, 100)}`)
      t.equal(answer.headers.get('content-type')?.split(';')[0], type)
    }
    const refused: [string, string][] = [
      ['/Api/Read/Changes/Rss', '*/*;q=0'],
      ['/Api/Read/Changes/Rss', 'application/rss+xml;q=0, application/*;q=0, text/csv;q=0'],
      ['/Api/Read/Reference', 'text/html;q=0, */*;q=0'],
    ]
    for (const [path, accept] of refused) {
      const answer = await service.call('GET', path, { headers: { accept } })
      t.equal(`${answer.status} ${answer.text}`, '406 Error: The Accept header refuses every format of this service (json, xml, csv).', `${path} with Accept ${accept}`)
    }
  }),
)
