/**
 * A plugin from outside the repository may hold its own copy of the sdk (keygate
 * installed as a copy, or the kernel from dist/ and the plugin's `keygate/sdk` from
 * elsewhere): the answers and errors it makes with that copy are encoded as with the
 * kernel's own. Here the second copy is the same module files imported again under
 * another URL, so each class exists twice and `instanceof` across copies is false.
 */
import t from 'tap'
import { encode } from '../kernel/http/encoders.ts'
import { answerValue } from '../kernel/http/jsonText.ts'
import { ApiError } from '../kernel/http/errors.ts'
import { BodyPieces, bodyBytes } from '../kernel/http/bodyPieces.ts'

const secondCopy = <Module>(path: string): Promise<Module> => import(new URL(`${path}?second-copy`, import.meta.url).href)

const route = { xml: { root: 'X' } }

t.test('a RawAnswer, a JsonText and an ApiError of another copy of the sdk', async (t) => {
  const { RawAnswer } = await secondCopy<typeof import('../kernel/http/rawAnswer.ts')>('../kernel/http/rawAnswer.ts')
  const { JsonText } = await secondCopy<typeof import('../kernel/http/jsonText.ts')>('../kernel/http/jsonText.ts')
  const { notFound } = await secondCopy<typeof import('../kernel/http/errors.ts')>('../kernel/http/errors.ts')

  const page = new RawAnswer('text/html; charset=utf-8', '<p>hi</p>')
  t.notOk(page instanceof (await import('../kernel/http/rawAnswer.ts')).RawAnswer, 'really another class')
  t.same(encode(page, 'json', route), { body: Buffer.from('<p>hi</p>'), contentType: 'text/html; charset=utf-8', status: 200 }, 'a page is sent as it is')
  t.equal(encode(new RawAnswer('text/plain', '', 304), 'xml', route).status, 304, 'its status too')

  const text = new JsonText('{"A": 1}')
  t.equal(encode(text, 'json', route).body.toString(), '{"A": 1}', 'json: the text byte for byte')
  t.match(encode(text, 'xml', route).body.toString(), /<X>\s*<A>1<\/A>\s*<\/X>/, 'xml: its value, not the object')
  t.same(answerValue(text), { A: 1 }, 'csv hooks and xmlValue get its value')
  // Pieces of bytes: sent as BodyPieces, which the kernel's copy recognises and joins
  // whichever copy made them.
  const pieces = encode(new JsonText(['{"A": ', Buffer.from('"é"}')]), 'json', route).body
  t.ok(BodyPieces.is(pieces), 'pieces of bytes are sent as pieces')
  t.equal(bodyBytes(pieces).toString(), '{"A": "é"}', 'their bytes, joined')
  const { BodyPieces: OtherBodyPieces } = await secondCopy<typeof import('../kernel/http/bodyPieces.ts')>('../kernel/http/bodyPieces.ts')
  const other = new OtherBodyPieces([Buffer.from('{"A": '), Buffer.from('"é"}')])
  t.notOk(other instanceof BodyPieces, 'really another class')
  t.ok(BodyPieces.is(other), "another copy's pieces, recognised by their mark")
  t.equal(bodyBytes(other).toString(), '{"A": "é"}', 'and joined')

  t.ok(ApiError.is(notFound()), 'an error is recognised too')
})

t.test('the mark decides, not the class or the shape', async (t) => {
  // A forged answer of a class of its own carrying the mark is taken as one ...
  const mark: unique symbol = Symbol.for('keygate.RawAnswer')
  class Foreign {
    readonly [mark] = true
    readonly contentType = 'text/plain'
    readonly body = Buffer.from('raw')
    readonly status = 201
  }
  t.same(encode(new Foreign(), 'json', route), { body: Buffer.from('raw'), contentType: 'text/plain', status: 201 })
  // A JsonText of an older copy, made before JsonText had bytes(): its text is sent.
  const textMark: unique symbol = Symbol.for('keygate.JsonText')
  class OlderJsonText {
    readonly [textMark] = true
    constructor(readonly text: string) {}
    value() { return JSON.parse(this.text) }
  }
  t.equal(encode(new OlderJsonText('{"B": 2}'), 'json', route).body.toString(), '{"B": 2}', "an older copy's JsonText: its text")
  // ... and a plain value with the same fields but no mark is a value to encode.
  const lookalike = { contentType: 'text/plain', text: '{"A":1}', body: 'raw', status: 201 }
  t.same(JSON.parse(encode(lookalike, 'json', route).body.toString()), lookalike)
})
