/**
 * Issue 12, items 1 and 7: what text the service stores and how it answers it.
 * - Every string and field name at any depth of every route's body and query is refused
 *   with a 400 naming the field when it holds a C0 control character other than tab,
 *   LF and CR, DEL, a C1 control, or a lone UTF-16 surrogate; nothing is written.
 * - A row written straight into the database with such characters (as an older version
 *   could have) is answered 200 in json, xml and csv; XML carries U+FFFD instead.
 * - XML element names made from field names are valid (rate-limit windows such as 1Min).
 * - CSV cells that start a formula after spaces, or with a full-width sign, are neutralised.
 * - The rule's check (textProblem) names the same first problem as a plain recursive
 *   reference for random values: it decides clean values in a pass of its own.
 */
import t from 'tap'
import { XMLParser } from 'fast-xml-parser'
import Papa from 'papaparse'
import { sql } from 'kysely'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { insertKey } from './helpers/keys.ts'
import { encode } from '../kernel/http/encoders.ts'
import { textProblem, type TextProblem } from '../kernel/http/textRule.ts'

async function peopleCount(service: Service): Promise<number> {
  const row = await sql<{ count: number }>`select count(*) as count from people`.execute(service.kernel.database.db)
  return Number(row.rows[0].count)
}

// Every C0 control, DEL and U+FFFE, as an older version could have stored them.
const storedControls = Array.from({ length: 32 }, (_, code) => String.fromCharCode(code)).join('') + '\u007f\ufffe'
// What XML carries instead: tab, LF, CR and DEL are XML characters (CR written &#13;); the rest become U+FFFD.
const inXml = storedControls.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe]/g, '\ufffd').replace('\r', '&#13;')

t.test('control characters and lone surrogates are refused at input, at any depth, on every route', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const refused: [string, string, unknown, string][] = [
      ['POST', '/People/Update/OneChange', { FirstName: 'Ann', LastName: 'Zed\u0001' }, 'Error: LastName must not contain control characters.'],
      ['POST', '/People/Update/OneChange', { FirstName: 'Ann', LastName: 'Nul\u0000' }, 'Error: LastName must not contain control characters.'],
      ['POST', '/People/Update/OneChange', { FirstName: 'Ann', Title: 'x\u001f' }, 'Error: Title must not contain control characters.'],
      ['POST', '/People/Update/OneChange', { FirstName: 'Ann', Title: 'x\u007f' }, 'Error: Title must not contain control characters.'],
      ['POST', '/People/Update/OneChange', { FirstName: 'Ann', Title: 'x\u0085y' }, 'Error: Title must not contain control characters.'],
      ['POST', '/People/Update/OneChange', { FirstName: 'Ann', LastName: 'Don\u0092t' }, 'Error: LastName must not contain control characters.'],
      ['POST', '/People/Update/OneChange', { FirstName: 'Half \ud83d' }, 'Error: FirstName is not valid Unicode text.'],
      ['POST', '/People/Update/OneChange', { FirstName: 'Other half \ude00' }, 'Error: FirstName is not valid Unicode text.'],
      ['POST', '/People/Update/OneChange', { FirstName: 'Ann', 'Last\u0002': 'x' }, 'Error: body has a field name with control characters.'],
      ['POST', '/Api/Create/Key', { Display_Name: 'Bell\u0007', GroupId: 1 }, 'Error: Display_Name must not contain control characters.'],
      ['POST', '/Api/Read/Log', { LogRequestId: '1\u0000' }, 'Error: LogRequestId must not contain control characters.'],
    ]
    for (const [method, path, body, text] of refused) {
      const answer = await service.call(method, path, { body, today: true })
      t.equal(answer.status, 400, `${path} ${JSON.stringify(body)}`)
      t.equal(answer.text, text)
    }
    t.equal(await peopleCount(service), 0, 'no refused call wrote a person')

    // Deep in an import batch, and in CSV text: the row is refused alone, by the same
    // schema layer, with the same text (issue 5: a bad row never aborts the batch).
    const importId = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    const batch = await service.call('POST', '/people/update/importmass', {
      body: { ImportId: importId, People: [{ Source_Id: 'a', LastName: 'Fine' }, { Source_Id: 'b', LastName: 'Bad\u0003' }] },
    })
    t.equal(batch.status, 200)
    t.match(batch.json, { Added: 1, Rejected: 1, Rejections: [{ Row: 2, Source_Id: 'b', Reason: 'LastName must not contain control characters.' }] })
    const csv = await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, Csv: 'Source_Id,LastName\r\nc,Bad\u0004\r\n' } })
    t.equal(csv.status, 200)
    t.match(csv.json, { Added: 0, Rejected: 1, Rejections: [{ Row: 1, Source_Id: 'c', Reason: 'LastName must not contain control characters.' }] })
    t.equal(await peopleCount(service), 1, 'only the good import row was written')
    const badHeader = await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, Csv: 'Source_Id,Last\u0005Name\r\nd,Fine\r\n' } })
    t.equal(badHeader.status, 400, 'a CSV header is not a row: refused whole')

    // Queries: declared parameters, and parameters of a route that declares none.
    const filter = await service.call('GET', `/People/Read/Missing?filter=${encodeURIComponent('LastName=a\u0001')}`)
    t.equal(filter.status, 400)
    t.equal(filter.text, 'Error: filter must not contain control characters.')
    const undeclared = await service.call('GET', '/Api/Read/Acl?note=%01')
    t.equal(undeclared.status, 400)
    t.equal(undeclared.text, 'Error: note must not contain control characters.')
    const badName = await service.call('GET', '/Api/Read/Acl?n%00=1')
    t.equal(badName.status, 400)
    t.equal(badName.text, 'Error: query has a field name with control characters.')

    // Tab, LF and CR stay allowed in free text.
    const kept = await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Tab\there', LastName: 'Kept', Title: 'Line one\r\nline two' } })
    t.equal(kept.status, 200, kept.text)
    t.equal(kept.json.FirstName, 'Tab\there')
    t.equal(kept.json.Title, 'Line one\r\nline two')
    // An XML reader turns a raw CR into LF (XML 1.0 2.11): the answer writes it as &#13;.
    const asXml = await service.call('GET', '/People/Read/Missing?format=xml')
    t.ok(asXml.text.includes('<Title>Line one&#13;\nline two</Title>'), asXml.text)
    const parsed = new XMLParser({ processEntities: true, htmlEntities: true }).parse(asXml.text)
    t.equal([parsed.People.Person].flat().find((one: { LastName: string }) => one.LastName === 'Kept').Title, 'Line one\r\nline two', 'a reader gets the CR back')
  }),
)

t.test('a stored row with any control character is answered 200 in json, xml and csv', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const person = await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Old', LastName: 'Row' } })
    t.equal(person.status, 200)
    // As an older version wrote it: no stored record text (SQLite's people.record_text), so it is rendered from the columns.
    await sql`update people set last_name = ${storedControls}, title = ${'\u0000'}, record_text = null where id = ${person.json.Id}`.execute(service.kernel.database.db)

    const json = await service.call('GET', '/People/Read/Missing?format=json')
    t.equal(json.status, 200, json.text)
    t.equal(json.json.People[0].LastName, storedControls, 'json carries the stored value exactly')

    const xml = await service.call('GET', '/People/Read/Missing?format=xml')
    t.equal(xml.status, 200, xml.text)
    t.equal(xml.headers.get('content-type'), 'application/xml; charset=utf-8')
    t.ok(xml.text.includes(`<LastName>${inXml}</LastName>`), 'xml carries U+FFFD for what XML 1.0 cannot hold')
    t.ok(xml.text.includes('<Title>\ufffd</Title>'))
    t.notMatch(xml.text, /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/, 'no character XML 1.0 forbids')

    const csv = await service.call('GET', '/People/Read/Missing?format=csv')
    t.equal(csv.status, 200, csv.text)
    const rows = Papa.parse<Record<string, string>>(csv.text, { header: true, skipEmptyLines: true }).data
    t.equal(rows.length, 1)
    t.equal(rows[0].FirstName, 'Old')
  }),
)

t.test('XML element names made from field names are always valid', async (t) => {
  const odd = { Plain: 1, '1Min': 2, '10/1Sec': { Limit: 3 }, '@attr': 4, '#': 5, '=': 6, 'a b': 7, 'x\u0001': 8, '': 9, é: 10, '_1Min': 11 }
  const xml = encode(odd, 'xml', { xml: { root: 'Odd' } }).body.toString()
  t.equal(xml, [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<Odd>',
    '    <Plain>1</Plain>',
    '    <_1Min>2</_1Min>',
    '    <_10_1Sec>',
    '        <Limit>3</Limit>',
    '    </_10_1Sec>',
    '    <_attr>4</_attr>',
    '    <_>5</_>',
    '    <__2>6</__2>',
    '    <a_b>7</a_b>',
    '    <x_>8</x_>',
    '    <__3>9</__3>',
    '    <é>10</é>',
    '    <_1Min_2>11</_1Min_2>',
    '</Odd>',
  ].join('\n'))
})

t.test('XML of rate-limit windows (1Min) is answered', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const key = await insertKey(service, { max_hits: '5/1Min,100/1Hour' })
    const xml = await service.call('GET', '/Api/Read/Limits?format=xml', { key })
    t.equal(xml.status, 200, xml.text)
    t.equal(xml.headers.get('content-type'), 'application/xml; charset=utf-8')
    t.match(xml.text, /<Limit>5<\/Limit>/)
  }),
)

t.test('a listing answers each person exactly as the write answered it, whatever the text holds', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    // Characters JSON escapes or treats specially (SQLite reads listing rows as JSON arrays), non-BMP text, empty fields.
    const fields = {
      FirstName: '"Quoted" \\ back\\slash /', LastName: 'Zoë 😀 \u2028\u2029 \u00a0 \ufffe', Title: '{"json":[1,null]} </script>',
      Dept: 'Tab\there\r\nline two', Email: 'a.b@example.com', Birthday: '1990-02-28', Phone: '', Custno: 0,
    }
    const created = await service.call('POST', '/People/Update/OneChange', { body: fields })
    t.equal(created.status, 200, created.text)
    for (const [method, path] of [['GET', '/People/Read/Missing'], ['POST', '/people/read/list']] as const) {
      const listed = await service.call(method, path, method === 'POST' ? { body: {} } : {})
      t.equal(listed.status, 200, listed.text)
      t.same(listed.json.People, [created.json], `${path}: the same record, field for field`)
    }
  }),
)

t.test('CSV: formulas after spaces and full-width formula signs are neutralised', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const fields = { FirstName: ' =1+1', LastName: '\uff1d1+1', NickName: '\uff0b1', Dept: '\uff0d1', Title: '\uff20SUM(1)', Location: '\u3000=1', Phone: '\t=1' }
    const created = await service.call('POST', '/People/Update/OneChange', { body: fields })
    t.equal(created.status, 200, created.text)
    const csv = await service.call('GET', '/People/Read/Missing?format=csv')
    t.equal(csv.status, 200)
    const row = Papa.parse<Record<string, string>>(csv.text, { header: true, skipEmptyLines: true }).data[0]
    for (const [name, value] of Object.entries(fields)) t.equal(row[name], `'${value}`, `${name} ${JSON.stringify(value)} is prefixed`)
    t.equal(row.Gender, 'U', 'plain cells are not')
    const json = await service.call('GET', '/People/Read/Missing?format=json')
    t.equal(json.json.People[0].FirstName, ' =1+1', 'json is unchanged')
  }),
)

t.test('textProblem names the first problem in document order, as a plain reference does', (t) => {
  const controls = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/
  const lone = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
  const problemOf = (text: string) => (lone.test(text) ? 'is not valid Unicode text' : controls.test(text) ? 'must not contain control characters' : null)
  function reference(value: unknown, path: (string | number)[] = []): TextProblem | null {
    if (typeof value === 'string') {
      const message = problemOf(value)
      return message ? { path, message } : null
    }
    if (Array.isArray(value)) {
      for (const [index, item] of value.entries()) {
        const found = reference(item, [...path, index])
        if (found) return found
      }
      return null
    }
    if (value !== null && typeof value === 'object') {
      for (const [name, item] of Object.entries(value)) {
        const message = problemOf(name)
        if (message) return { path, message: message.startsWith('is ') ? 'has a field name that is not valid Unicode text' : 'has a field name with control characters' }
        const found = reference(item, [...path, name])
        if (found) return found
      }
    }
    return null
  }

  // Mostly clean text, sometimes a control character, a surrogate pair or half of one.
  const pieces = ['a', 'Zoë', ' ', '\t', '\n', '\r', '\u0001', '\u007f', '\u001f', '\ud83d\ude00', '\ud83d', '\ude00', '\uffff', '\u0085']
  let seed = 11
  const next = (below: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % below
  const text = () => Array.from({ length: next(5) }, () => pieces[next(10) < 2 ? next(3) : next(pieces.length)]).join('')
  const value = (depth: number): unknown => {
    const kind = depth > 3 ? next(3) : next(5)
    if (kind === 0) return text()
    if (kind === 1) return next(2) === 0 ? next(100) : null
    if (kind === 2) return next(2) === 0
    if (kind === 3) return Array.from({ length: next(4) }, () => value(depth + 1))
    return Object.fromEntries(Array.from({ length: next(4) }, () => [text(), value(depth + 1)]))
  }
  let refused = 0
  for (let round = 0; round < 2000; round++) {
    const sample = value(0)
    const expected = reference(sample)
    if (expected) refused++
    if (JSON.stringify(textProblem(sample)) !== JSON.stringify(expected)) {
      t.fail(`round ${round}: ${JSON.stringify(sample)} gave ${JSON.stringify(textProblem(sample))}, expected ${JSON.stringify(expected)}`)
      return t.end()
    }
  }
  t.ok(refused > 100 && refused < 1900, `both kinds sampled (${refused} of 2000 refused)`)
  t.end()
})
