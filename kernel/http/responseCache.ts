import { LRUCache } from 'lru-cache'

export interface CachedAnswer {
  status: number
  body: Buffer
  contentType: string
  headers: [string, string][]
}

/**
 * The response cache stage's store: a bounded LRU of encoded answers. Partitions are
 * dropped by bumping a generation number that is part of every key, so invalidation
 * is O(1) and old entries simply age out of the LRU.
 */
export class ResponseCache {
  private readonly entries: LRUCache<string, CachedAnswer>
  private readonly generations = new Map<string, number>()
  private readonly values = new LRUCache<string, { value: unknown }>({ max: 10_000 })

  constructor(maxEntries: number, maxBytes: number) {
    this.entries = new LRUCache({
      max: maxEntries,
      maxSize: maxBytes,
      sizeCalculation: answerSize,
      ttlAutopurge: false,
    })
  }

  /** Answers held now (bounded by maxEntries and maxBytes). */
  get size(): number {
    return this.entries.size
  }

  key(routeId: number, partition: string, variant: string): string {
    return `${routeId}\u0000${partition}\u0000${this.generations.get(partition) ?? 0}\u0000${variant}`
  }

  get(key: string): CachedAnswer | undefined {
    return this.entries.get(key)
  }

  set(key: string, answer: CachedAnswer, ttlSeconds: number): void {
    this.entries.set(key, { ...answer, body: ownCopy(answer.body) }, { ttl: ttlSeconds * 1000 })
  }

  /**
   * A value worth keeping between calls (a listing's Total, say), in the same partitions
   * as the answers, so the same invalidation drops it. A value computed across an
   * invalidation is stored under the old generation and never read.
   */
  async remember<T>(partition: string, name: string, ttlSeconds: number, compute: () => Promise<T>): Promise<T> {
    const key = `${partition}\u0000${this.generations.get(partition) ?? 0}\u0000${name}`
    const known = this.values.get(key)
    if (known) return known.value as T
    const value = await compute()
    this.values.set(key, { value }, { ttl: ttlSeconds * 1000 })
    return value
  }

  invalidate(partition: string): void {
    this.generations.set(partition, (this.generations.get(partition) ?? 0) + 1)
  }

  /** Drops every answer and value (an ACL or group change can alter any key's answers). */
  clear(): void {
    this.entries.clear()
    this.values.clear()
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

/**
 * A small answer is usually a slice of one of Node's shared 8 KiB pool blocks: cached as
 * it is, a few hundred bytes would keep the whole block alive for the entry's lifetime
 * (issue 19, goal 4). The cache keeps a buffer of its own instead.
 */
function ownCopy(body: Buffer): Buffer {
  if (body.byteLength === body.buffer.byteLength) return body
  const copy = Buffer.allocUnsafeSlow(body.byteLength)
  body.copy(copy)
  return copy
}
