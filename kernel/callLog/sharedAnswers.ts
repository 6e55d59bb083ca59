import { createHash } from 'node:crypto'
import type { SharedText } from '../storage/database.ts'
import type { LogRow } from './record.ts'

/**
 * Answers served from the response cache, logged at level 2 (issue 19, goal 2). Such an
 * answer is the same bytes for every call that got it (a display screen asking for its
 * ACL or its people page every few seconds), and writing its 4 KB into every record
 * was most of a level-2 call's cost. Its record names it by digest instead
 * (`response_digest`, `response` null) and the text is kept once in `api_log_body`,
 * written in the same transaction as the records that name it, so no stored record
 * names a text that is not there. Reads put the text back (reads.ts); retention drops
 * it after the last record that may show it (retention.ts). A record still in the
 * queue keeps its bytes, and one written row by row stores its text inline.
 */
export class AnswerDigests {
  // Keyed by the cache's own body buffer (one per distinct answer, sharedBodies.ts): a
  // digest is computed once per cached answer, and goes when the cache drops the body.
  private readonly digests = new WeakMap<Uint8Array, string>()

  of(body: Uint8Array): string {
    let digest = this.digests.get(body)
    if (digest === undefined) {
      digest = createHash('sha256').update(body).digest('base64url')
      this.digests.set(body, digest)
    }
    return digest
  }
}

/**
 * A batch as written: records that name a shared answer lose their copy of its text,
 * and each distinct text goes once, kept until the latest detail_until that names it.
 */
export function withSharedAnswers(batch: readonly LogRow[]): { rows: readonly LogRow[]; texts: SharedText[] } {
  let rows: LogRow[] | null = null
  const texts = new Map<string, SharedText>()
  for (let index = 0; index < batch.length; index++) {
    const row = batch[index]
    const digest = row.response_digest
    if (!digest || row.response === null || row.response === undefined) continue
    rows ??= batch.slice()
    rows[index] = { ...row, response: null }
    const known = texts.get(digest)
    if (known === undefined) texts.set(digest, { digest, body: row.response, keep_until: row.detail_until })
    else if (row.detail_until > known.keep_until) known.keep_until = row.detail_until
  }
  // In digest order: processes writing the same texts on MySQL take their row locks in
  // one order, so they wait for each other rather than deadlock.
  return { rows: rows ?? batch, texts: [...texts.values()].sort((a, b) => (a.digest < b.digest ? -1 : a.digest > b.digest ? 1 : 0)) }
}
