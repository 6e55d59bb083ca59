import { carriesMark } from './copyMark.ts'

/**
 * An answer whose JSON the handler already holds as text (records a plugin stores
 * rendered, say): a json answer sends `text` as it is, with no value built or
 * stringified on the request path; xml, csv and a level-2 log record take `value()`,
 * the same text parsed, built only when one of them asks.
 *
 * The handler vouches that `text` is valid JSON of the value the route documents.
 */
// Recognised by this mark, not by its class (copyMark.ts).
const jsonTextMark = Symbol.for('keygate.JsonText')

export class JsonText {
  #value: unknown
  #parsed = false
  readonly [jsonTextMark] = true

  constructor(readonly text: string) {}

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

/** A handler's answer as a value: a JsonText parsed, anything else as it is. */
export function answerValue(answer: unknown): unknown {
  return JsonText.is(answer) ? answer.value() : answer
}
