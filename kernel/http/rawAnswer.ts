import { carriesMark } from './copyMark.ts'

/**
 * An answer that is not a value to encode as json/xml/csv but bytes of its own type
 * (an HTML page, an RSS feed, a script, an image): a handler returns one and the encoder
 * sends it as it is, whatever format the caller asked for. Extra headers go through
 * `call.setHeader`. `status` is 200 unless given (a 304 Not Modified, say).
 */
// Recognised by this mark, not by its class (copyMark.ts).
const rawAnswerMark = Symbol.for('keygate.RawAnswer')

export class RawAnswer {
  readonly body: Buffer
  readonly [rawAnswerMark] = true
  constructor(
    readonly contentType: string,
    body: Buffer | string,
    readonly status = 200,
  ) {
    this.body = typeof body === 'string' ? Buffer.from(body) : body
  }

  /** True for a RawAnswer made by any copy of this module. */
  static is(answer: unknown): answer is RawAnswer {
    return carriesMark(answer, rawAnswerMark)
  }

  /** What a level-2 call log keeps of it: a description, not the bytes. */
  toJSON(): { Status: number; ContentType: string; Bytes: number } {
    return { Status: this.status, ContentType: this.contentType, Bytes: this.body.length }
  }
}
