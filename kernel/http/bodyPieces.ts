import { carriesMark } from './copyMark.ts'

// Recognised by this mark, not by its class: a plugin's own copy of keygate/sdk makes
// these through its JsonText (copyMark.ts).
const bodyPiecesMark = Symbol.for('keygate.BodyPieces')

/**
 * An answer's bytes in pieces, sent one after another (node:http writes them with the
 * head in one writev) without being joined into one buffer first. A people page is its
 * head, the 45 KB of records SQLite joined and returned as bytes, and its tail: joining
 * them cost a second 45 KB buffer a call, whose external memory drew full garbage
 * collections under load (docs/benchmarks.md, thirty-fourth session).
 *
 * What needs the bytes as one buffer (the response cache, a stored Idempotency-Key
 * answer, an error text in the logs) takes `joined()`, made once.
 */
export class BodyPieces {
  readonly length: number
  readonly [bodyPiecesMark] = true
  #joined: Buffer | null = null

  constructor(readonly pieces: readonly Uint8Array[]) {
    let length = 0
    for (const piece of pieces) length += piece.byteLength
    this.length = length
  }

  joined(): Buffer {
    this.#joined ??= Buffer.concat(this.pieces, this.length)
    return this.#joined
  }

  /** True for BodyPieces made by any copy of this module. */
  static is(body: unknown): body is BodyPieces {
    return carriesMark(body, bodyPiecesMark)
  }
}

/** An answer's body: one buffer, or pieces (above). Both have `length`, in bytes. */
export type AnswerBody = Buffer | BodyPieces

/** The body as one buffer. */
export function bodyBytes(body: AnswerBody): Buffer {
  return BodyPieces.is(body) ? body.joined() : body
}
