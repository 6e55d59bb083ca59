/**
 * A handler may answer JSON it already holds as text (`JsonText`, kernel/http/jsonText.ts;
 * the people listings do): a json answer is that text byte for byte, never parsed or
 * stringified again; xml, csv (through the route's `csv`) and a level-2 log record get
 * its value; the response cache keeps it like any answer.
 */
import t from 'tap'
import { XMLParser } from 'fast-xml-parser'
import { defineRoute, JsonText, type JsonPiece, type Plugin } from '../kernel/sdk.ts'
import { BodyPieces, bodyBytes } from '../kernel/http/bodyPieces.ts'
import { forEachDatabase, startService } from './helpers/service.ts'

// Spaced as JSON.stringify never would: a json answer that is this text was sent as it is.
const text = '{"Total": 2,  "Items": [{"Name": "Zoë", "Count": 1}, {"Name": "=cmd", "Count": 2}]}'

const textPlugin: Plugin = {
  name: 'text-probe',
  defaultGroups: [{
    name: 'Text probe',
    paths: [
      { path: '/Probe/Text', displayName: 'answers JSON text' },
      { path: '/Probe/Pieces', displayName: 'answers JSON text in pieces' },
      { path: '/Probe/Bytes', displayName: 'answers JSON text in pieces, some of them bytes' },
    ],
  }],
  setup: () => [
    defineRoute({
      method: 'GET',
      path: '/Probe/Text',
      xml: { root: 'Text', item: 'Item', list: 'Items' },
      csv: (answer: { Items: unknown[] }) => answer.Items,
      cache: { ttlSeconds: 60, partition: () => 'text' },
      handler: () => new JsonText(text),
    }),
    defineRoute({
      method: 'GET',
      path: '/Probe/Pieces',
      xml: { root: 'Text', item: 'Item', list: 'Items' },
      csv: (answer: { Items: unknown[] }) => answer.Items,
      // The same text in pieces, one of them empty and one a character of two bytes.
      handler: () => new JsonText(pieces),
    }),
    defineRoute({
      method: 'GET',
      path: '/Probe/Bytes',
      xml: { root: 'Text', item: 'Item', list: 'Items' },
      csv: (answer: { Items: unknown[] }) => answer.Items,
      cache: { ttlSeconds: 60, partition: () => 'bytes' },
      handler: () => new JsonText(bytePieces()),
    }),
  ],
}

const pieces = [text.slice(0, 30), '', text.slice(30, text.indexOf('ë')), 'ë', text.slice(text.indexOf('ë') + 1)]

/**
 * The same text as text and UTF-8 bytes (as a database hands a BLOB over), an empty
 * piece of each kind, and the two bytes of ë split between two byte pieces.
 */
function bytePieces(): JsonPiece[] {
  const bytes = Buffer.from(text)
  const split = bytes.indexOf(Buffer.from('ë')) + 1
  return [text.slice(0, 10), Buffer.alloc(0), bytes.subarray(10, split), '', bytes.subarray(split, bytes.length - 1), '}']
}

t.test('a JsonText answer: the text as json, its value as xml, csv and in the log', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [textPlugin] })

    const json = await service.call('GET', '/Probe/Text?format=json', { headers: { 'x-LogLevel': '2' } })
    t.equal(json.status, 200)
    t.equal(json.headers.get('content-type'), 'application/json; charset=utf-8')
    t.equal(json.text, text, 'the text, byte for byte')
    const again = await service.call('GET', '/Probe/Text?format=json')
    t.equal(again.headers.get('x-cache'), 'HIT', 'cached like any answer')
    t.equal(again.text, text)

    const xml = await service.call('GET', '/Probe/Text?format=xml')
    t.equal(xml.headers.get('content-type'), 'application/xml; charset=utf-8')
    t.same(new XMLParser().parse(xml.text).Text, { Total: 2, Item: [{ Name: 'Zoë', Count: 1 }, { Name: '=cmd', Count: 2 }] }, 'xml: the value, its list as items')

    const csv = await service.call('GET', '/Probe/Text?format=csv')
    t.equal(csv.headers.get('content-type'), 'text/csv; charset=utf-8')
    t.equal(csv.text, `Name,Count\r\nZoë,1\r\n"'=cmd",2`, "csv: the route's rows of the value, formulae neutralised")

    const log = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: Number(json.headers.get('x-requestid')) } })
    t.equal(log.status, 200, log.text)
    t.same(log.json.Rsponse, JSON.parse(text), 'a level-2 record keeps the value')
  }),
)

t.test('a JsonText in pieces: the pieces one after another, byte for byte, and the same value', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [textPlugin] })
    t.equal(pieces.join(''), text)
    const json = await service.call('GET', '/Probe/Pieces?format=json')
    t.equal(json.status, 200)
    t.equal(json.headers.get('content-length'), String(Buffer.byteLength(text)), 'its length in bytes')
    t.equal(json.text, text, 'the pieces, byte for byte')
    const xml = await service.call('GET', '/Probe/Pieces?format=xml')
    t.same(new XMLParser().parse(xml.text).Text, { Total: 2, Item: [{ Name: 'Zoë', Count: 1 }, { Name: '=cmd', Count: 2 }] }, 'xml: the value of the whole')
    const csv = await service.call('GET', '/Probe/Pieces?format=csv')
    t.equal(csv.text, `Name,Count\r\nZoë,1\r\n"'=cmd",2`)
    t.equal(new JsonText(['{"A":', '"é"}']).bytes().toString(), '{"A":"é"}', 'bytes() of pieces')
    t.same(new JsonText(['{"A":', '"é"}']).value(), { A: 'é' }, 'value() of pieces')
  }),
)

t.test('a JsonText with pieces of bytes: sent as they are, the same text, value, cached answer and log record', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [textPlugin] })
    const json = await service.call('GET', '/Probe/Bytes?format=json', { headers: { 'x-LogLevel': '2' } })
    t.equal(json.status, 200)
    t.equal(json.headers.get('content-length'), String(Buffer.byteLength(text)), 'its length in bytes')
    t.equal(json.text, text, 'the pieces, byte for byte')
    const again = await service.call('GET', '/Probe/Bytes?format=json')
    t.equal(again.headers.get('x-cache'), 'HIT', 'cached like any answer')
    t.equal(again.headers.get('content-length'), String(Buffer.byteLength(text)))
    t.equal(again.text, text)
    const xml = await service.call('GET', '/Probe/Bytes?format=xml')
    t.same(new XMLParser().parse(xml.text).Text, { Total: 2, Item: [{ Name: 'Zoë', Count: 1 }, { Name: '=cmd', Count: 2 }] }, 'xml: the value of the whole')
    const csv = await service.call('GET', '/Probe/Bytes?format=csv')
    t.equal(csv.text, `Name,Count\r\nZoë,1\r\n"'=cmd",2`)
    const log = await service.call('POST', '/Api/Read/Log', { body: { LogRequestId: Number(json.headers.get('x-requestid')) } })
    t.same(log.json.Rsponse, JSON.parse(text), 'a level-2 record keeps the value')
  }),
)

t.test("a JsonText's pieces of bytes are not copied for a json answer", async (t) => {
  const pieces = bytePieces()
  const answer = new JsonText(pieces)
  t.equal(answer.text, text, 'text: the pieces decoded as a whole (a character split between two)')
  t.equal(answer.bytes().toString(), text, 'bytes(): one buffer')
  const body = answer.body()
  t.ok(body instanceof BodyPieces, 'body(): pieces')
  const sent = (body as BodyPieces).pieces
  for (const piece of pieces) if (typeof piece !== 'string') t.ok(sent.includes(piece), 'each piece of bytes is sent itself')
  t.equal(body.length, Buffer.byteLength(text))
  t.equal(bodyBytes(body).toString(), text)
  t.ok(Buffer.isBuffer(new JsonText(['{"A":', '1}']).body()), 'text alone: one buffer, as before')
})
