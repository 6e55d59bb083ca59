import { LRUCache } from 'lru-cache'
import { SharedBodies } from './sharedBodies.ts'

export interface CachedAnswer {
  status: number
  body: Buffer
  contentType: string
  headers: [string, string][]
}

/** A partition's invalidation: the generation its keys now carry, kept until every older answer has expired. */
interface PartitionMark {
  generation: number
  until: number
}

/**
 * The response cache stage's store: a bounded LRU of encoded answers. Partitions are
 * dropped by giving them a new generation number that is part of every key, so
 * invalidation is O(1) and old entries simply age out of the LRU.
 *
 * A partition's mark is kept only as long as an answer cached before it could live (the
 * longest TTL seen), then forgotten (issue 19 goal 4: every key or tenant ever changed
 * used to leave a mark for the life of the process). Generations come from one counter
 * and are never reused, so a forgotten mark cannot bring an older answer back.
 */
export class ResponseCache {
  private readonly entries: LRUCache<string, CachedAnswer>
  /** In the order they were made (a new mark moves to the end), so the expired ones are at the front. */
  private readonly marks = new Map<string, PartitionMark>()
  private lastGeneration = 0
  private longestTtlMs = 0
  private readonly values: LRUCache<string, { value: unknown }>
  /** Byte-identical bodies kept once (many keys with the same groups get the same ACL answer). */
  private readonly bodies = new SharedBodies()

  /** `now`: the clock of the answers' TTLs and of the marks, one clock for both (tests pass a fake one). */
  constructor(maxEntries: number, private readonly maxBytes: number, private readonly now: () => number = performance.now.bind(performance)) {
    // ttlResolution 0: read the clock each time rather than keep a reading for a millisecond.
    const clock = { perf: { now }, ttlResolution: 0 }
    this.values = new LRUCache({ max: 10_000, ...clock })
    this.entries = new LRUCache({
      ...clock,
      max: maxEntries,
      maxSize: maxBytes,
      sizeCalculation: answerSize,
      ttlAutopurge: false,
      // Every way out (evicted, expired, replaced, deleted, cleared): the body has one user fewer.
      dispose: (answer) => this.bodies.release(answer.body),
    })
  }

  /** Answers held now (bounded by maxEntries and maxBytes). */
  get size(): number {
    return this.entries.size
  }

  /** Distinct bodies the held answers share (at most `size`). */
  get sharedBodies(): number {
    return this.bodies.size
  }

  /** Partitions invalidated recently enough that an older answer may still be cached (bounded by time). */
  get partitionMarks(): number {
    return this.marks.size
  }

  private generationOf(partition: string): number {
    return this.marks.size === 0 ? 0 : this.marks.get(partition)?.generation ?? 0
  }

  key(routeId: number, partition: string, variant: string): string {
    return `${routeId}\u0000${partition}\u0000${this.generationOf(partition)}\u0000${variant}`
  }

  get(key: string): CachedAnswer | undefined {
    return this.entries.get(key)
  }

  /** Invalidations so far; `set` takes the value read when its key was made. */
  get epoch(): number {
    return this.lastGeneration
  }

  /**
   * Keeps an answer whose key was made at `epoch`. Not when a partition was invalidated
   * in between: its key could name a generation already replaced, whose mark may then
   * be forgotten before this answer expires. Invalidations are rare beside calls.
   */
  set(key: string, answer: CachedAnswer, ttlSeconds: number, epoch = this.lastGeneration): void {
    // An answer larger than the whole bound is not kept (the LRU would refuse it without a word).
    if (!this.keeps(epoch, ttlSeconds) || answerSize(answer, key) > this.maxBytes) return
    // Counted at its full size even when its body is shared: the bound holds whatever the mix.
    this.entries.set(key, { ...answer, body: this.bodies.share(answer.body) }, { ttl: ttlSeconds * 1000 })
  }

  /**
   * A value worth keeping between calls (a listing's Total, say), in the same partitions
   * as the answers, so the same invalidation drops it. A value computed across an
   * invalidation is returned but not kept.
   */
  async remember<T>(partition: string, name: string, ttlSeconds: number, compute: () => Promise<T>): Promise<T> {
    const key = `${partition}\u0000${this.generationOf(partition)}\u0000${name}`
    const known = this.values.get(key)
    if (known) return known.value as T
    const epoch = this.lastGeneration
    const value = await compute()
    if (this.keeps(epoch, ttlSeconds)) this.values.set(key, { value }, { ttl: ttlSeconds * 1000 })
    return value
  }

  /**
   * Whether an answer or value made at `epoch` may be kept for `ttlSeconds`; if so, its
   * TTL is noted for the marks to outlast, and expired marks go (here too, so a burst of
   * changes followed by none leaves no marks behind).
   */
  private keeps(epoch: number, ttlSeconds: number): boolean {
    if (epoch !== this.lastGeneration) return false
    if (ttlSeconds * 1000 > this.longestTtlMs) this.longestTtlMs = ttlSeconds * 1000
    if (this.marks.size > 0) this.forgetExpiredMarks(this.now())
    return true
  }

  invalidate(partition: string): void {
    const now = this.now()
    this.forgetExpiredMarks(now)
    this.marks.delete(partition)
    this.marks.set(partition, { generation: ++this.lastGeneration, until: now + this.longestTtlMs })
  }

  // Every mark lasts the longest TTL seen, which only grows: the marks expire in the order they were made.
  private forgetExpiredMarks(now: number): void {
    for (const [name, mark] of this.marks) {
      if (mark.until > now) break
      this.marks.delete(name)
    }
  }

  /** Drops every answer and value (an ACL or group change can alter any key's answers). */
  clear(): void {
    this.entries.clear()
    this.values.clear()
    // An answer being computed now was computed under the old ACL: not kept either.
    this.lastGeneration++
  }
}

/**
 * What one cached answer costs, so `cache.responseBytes` bounds the memory and not just
 * the bodies (issue 19 goal 4): the body, the key (which holds a POST's whole body), the
 * headers, and for the rest the answer's objects, its Buffer and ArrayBuffer and the LRU's
 * slots, about 450 bytes in a heap snapshot of 30,000 cached 880-byte answers, where
 * the old allowance of 256 let the cache hold 1.5x its bound.
 */
const entryOverheadBytes = 512

export function answerSize(answer: CachedAnswer, key: string): number {
  let size = answer.body.length + key.length + entryOverheadBytes
  for (const [name, value] of answer.headers) size += name.length + value.length + 64
  return size
}
