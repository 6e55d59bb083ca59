import { carriesMark } from './copyMark.ts'

/**
 * An answer whose JSON the handler already holds as text (records a plugin stores
 * rendered, say): a json answer sends `text` as it is, with no value built or
 * stringified on the request path; xml, csv and a level-2 log record take `value()`,
 * the same text parsed, built only when one of them asks.
 *
 * The text may come in pieces (`new JsonText([head, records, tail])`): a json answer
 * writes them one after another into its one buffer, where joining them into a string
 * first would copy a large text once more (a 45 KB people page: 16 µs against 5).
 *
 * The handler vouches that the text is valid JSON of the value the route documents.
 */
// Recognised by this mark, not by its class (copyMark.ts).
const jsonTextMark = Symbol.for('keygate.JsonText')

export class JsonText {
  #value: unknown
  #parsed = false
  readonly [jsonTextMark] = true

  readonly #json: string | readonly string[]

  constructor(json: string | readonly string[]) {
    this.#json = json
  }

  /** The JSON text (its pieces joined). */
  get text(): string {
    return typeof this.#json === 'string' ? this.#json : this.#json.join('')
  }

  /** The JSON as UTF-8 bytes: what a json answer sends. */
  bytes(): Buffer {
    if (typeof this.#json === 'string') return Buffer.from(this.#json)
    let size = 0
    for (const piece of this.#json) size += Buffer.byteLength(piece)
    const bytes = Buffer.allocUnsafe(size)
    let at = 0
    for (const piece of this.#json) at += bytes.write(piece, at)
    // Each piece is counted and written in the same encoding, so every byte is written; the cut is a guard.
    return at === size ? bytes : bytes.subarray(0, at)
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

/**
 * A JsonText's bytes. One made by a plugin's own, older copy of keygate/sdk (recognised
 * by its mark, copyMark.ts) may have no bytes(): its text is sent then.
 */
export function jsonBytes(answer: JsonText): Buffer {
  return typeof answer.bytes === 'function' ? answer.bytes() : Buffer.from(answer.text)
}

/** A handler's answer as a value: a JsonText parsed, anything else as it is. */
export function answerValue(answer: unknown): unknown {
  return JsonText.is(answer) ? answer.value() : answer
}
