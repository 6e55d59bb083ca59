import { carriesMark } from './copyMark.ts'
import { BodyPieces, type AnswerBody } from './bodyPieces.ts'

/**
 * An answer whose JSON the handler already holds as text (records a plugin stores
 * rendered, say): a json answer sends `text` as it is, with no value built or
 * stringified on the request path; xml, csv and a level-2 log record take `value()`,
 * the same text parsed, built only when one of them asks.
 *
 * The text may come in pieces (`new JsonText([head, records, tail])`): a json answer
 * writes them one after another into its one buffer, where joining them into a string
 * first would copy a large text once more (a 45 KB people page: 16 µs against 5). A
 * piece may also be UTF-8 bytes (a Uint8Array, such as a BLOB the database joined):
 * then the json answer sends the pieces as they are, none copied (bodyPieces.ts).
 *
 * The handler vouches that the text is valid JSON of the value the route documents.
 */
// Recognised by this mark, not by its class (copyMark.ts).
const jsonTextMark = Symbol.for('keygate.JsonText')

export class JsonText {
  #value: unknown
  #parsed = false
  readonly [jsonTextMark] = true

  readonly #json: string | readonly JsonPiece[]
  /** Every piece is text (so is a whole string): settled once, asked by text and body(). */
  readonly #allText: boolean

  constructor(json: string | readonly JsonPiece[]) {
    this.#json = json
    this.#allText = typeof json === 'string' || json.every((piece) => typeof piece === 'string')
  }

  /** The JSON text (its pieces joined). */
  get text(): string {
    if (typeof this.#json === 'string') return this.#json
    // Bytes are decoded as a whole: a character's bytes may span two pieces.
    return this.#allText ? this.#json.join('') : this.bytes().toString('utf8')
  }

  /** The JSON as UTF-8 bytes: what a json answer sends. */
  bytes(): Buffer {
    if (typeof this.#json === 'string') return Buffer.from(this.#json)
    let size = 0
    for (const piece of this.#json) size += typeof piece === 'string' ? Buffer.byteLength(piece) : piece.byteLength
    const bytes = Buffer.allocUnsafe(size)
    let at = 0
    for (const piece of this.#json) {
      if (typeof piece === 'string') {
        at += bytes.write(piece, at)
      } else {
        bytes.set(piece, at)
        at += piece.byteLength
      }
    }
    // Each piece is counted and written in the same encoding, so every byte is written; the cut is a guard.
    return at === size ? bytes : bytes.subarray(0, at)
  }

  /** What a json answer sends: its pieces as they are when one of them is bytes, else bytes(). */
  body(): AnswerBody {
    if (this.#allText || typeof this.#json === 'string') return this.bytes()
    return new BodyPieces(this.#json.map((piece) => typeof piece === 'string' ? Buffer.from(piece) : piece))
  }

  /** True for a JsonText made by any copy of this module. */
  static is(answer: unknown): answer is JsonText {
    return carriesMark(answer, jsonTextMark)
  }

  /** The answer as a value: what the route's xml, csv and a level-2 log record get. */
  value(): unknown {
    if (!this.#parsed) {
      this.#value = JSON.parse(this.text)
      this.#parsed = true
    }
    return this.#value
  }

  /** JSON.stringify (a level-2 log record, with its secret-field redaction) sees the value. */
  toJSON(): unknown {
    return this.value()
  }
}

/** A piece of a JsonText: text, or its UTF-8 bytes. */
export type JsonPiece = string | Uint8Array

/**
 * What a json answer sends of a JsonText. One made by a plugin's own, older copy of
 * keygate/sdk (recognised by its mark, copyMark.ts) may have no body() or bytes(): its
 * bytes or its text are sent then.
 */
export function jsonBody(answer: JsonText): AnswerBody {
  if (typeof answer.body === 'function') return answer.body()
  return typeof answer.bytes === 'function' ? answer.bytes() : Buffer.from(answer.text)
}

/** A handler's answer as a value: a JsonText parsed, anything else as it is. */
export function answerValue(answer: unknown): unknown {
  return JsonText.is(answer) ? answer.value() : answer
}
