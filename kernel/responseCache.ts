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

  constructor(maxEntries: number, maxBytes: number) {
    this.entries = new LRUCache({
      max: maxEntries,
      maxSize: maxBytes,
      // The body plus a rough allowance for the key, the entry and the LRU's own slots.
      sizeCalculation: (answer) => answer.body.length + 256,
      ttlAutopurge: false,
    })
  }

  key(routeId: number, partition: string, variant: string): string {
    return `${routeId}\u0000${partition}\u0000${this.generations.get(partition) ?? 0}\u0000${variant}`
  }

  get(key: string): CachedAnswer | undefined {
    return this.entries.get(key)
  }

  set(key: string, answer: CachedAnswer, ttlSeconds: number): void {
    this.entries.set(key, answer, { ttl: ttlSeconds * 1000 })
  }

  invalidate(partition: string): void {
    this.generations.set(partition, (this.generations.get(partition) ?? 0) + 1)
  }
}
