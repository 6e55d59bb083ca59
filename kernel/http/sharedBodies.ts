/**
 * Cached answers' bodies, each distinct byte sequence kept once (issue 19 goal 4). Keys
 * with the same groups get byte-identical ACL answers, so a cache of 20,000 such answers
 * held 20,000 copies of one body: each a separate native allocation that lived until a
 * full collection after its eviction, which under a stream of new keys fragmented the
 * C heap by tens of megabytes. Bodies are counted by their users and dropped by the last.
 */
export class SharedBodies {
  /** By a digest of length and sampled bytes; the few bodies that share one are told apart by their bytes. */
  private readonly byDigest = new Map<number, SharedBody[]>()
  private count = 0

  /** Distinct bodies held now. */
  get size(): number {
    return this.count
  }

  /**
   * The kept body with these bytes (one more user), or this one, kept: as it is when it
   * owns its memory, else as a copy (a small body is usually a slice of one of Node's
   * shared 8 KiB pool blocks, and kept as it is it would keep the whole block alive).
   */
  share(body: Buffer): Buffer {
    const digest = digestOf(body)
    let bucket = this.byDigest.get(digest)
    if (bucket !== undefined) {
      for (const shared of bucket) {
        if (shared.body.equals(body)) {
          shared.users++
          return shared.body
        }
      }
    }
    const kept = body.byteLength === body.buffer.byteLength ? body : ownCopy(body)
    // Many different bodies with one digest (same length, same sampled bytes) are not
    // worth a longer search: past a few, a body is kept unshared (release ignores it).
    if (bucket !== undefined && bucket.length >= bucketMax) return kept
    if (bucket === undefined) this.byDigest.set(digest, bucket = [])
    bucket.push({ body: kept, users: 1 })
    this.count++
    return kept
  }

  /** One user fewer: the body goes with its last. */
  release(body: Buffer): void {
    const digest = digestOf(body)
    const bucket = this.byDigest.get(digest)
    if (bucket === undefined) return
    const index = bucket.findIndex((shared) => shared.body === body)
    if (index === -1 || --bucket[index].users > 0) return
    bucket.splice(index, 1)
    this.count--
    if (bucket.length === 0) this.byDigest.delete(digest)
  }
}

function ownCopy(body: Buffer): Buffer {
  const copy = Buffer.allocUnsafeSlow(body.byteLength)
  body.copy(copy)
  return copy
}

interface SharedBody {
  body: Buffer
  users: number
}

const bucketMax = 8

/** Bytes sampled for the digest: enough to tell most different bodies apart without reading all of each. */
const sampledBytes = 64

/** FNV-1a over the length, up to 64 evenly spaced bytes and the last 16: cheap, and a match is confirmed byte by byte. */
function digestOf(body: Buffer): number {
  const length = body.byteLength
  let hash = Math.imul(0x811c9dc5 ^ length, 0x01000193)
  const step = Math.max(1, Math.floor(length / sampledBytes))
  for (let at = 0; at < length; at += step) hash = Math.imul(hash ^ body[at], 0x01000193)
  for (let at = Math.max(0, length - 16); at < length; at++) hash = Math.imul(hash ^ body[at], 0x01000193)
  return hash
}
