import type { KeyDirectory } from '../auth/keyDirectory.ts'
import type { ResponseCache } from '../http/responseCache.ts'
import type { ClusterLink, Invalidation } from './cluster.ts'

/** The response-cache partition of everything cached for one key; dropped when that key changes. */
export const keyPartition = (keyId: number) => `key:${keyId}`

/**
 * Forgetting what a change made stale: a key's auth record and cached answers, every
 * loaded key and cached answer (an ACL or group change), or one cache partition. Applied here and, in
 * cluster mode, on every sibling worker.
 */
export function invalidation(keys: KeyDirectory, cache: ResponseCache, cluster: ClusterLink | undefined): (change: Invalidation) => void {
  const apply = (change: Invalidation) => {
    if (change.kind === 'partition') return cache.invalidate(change.partition)
    if (change.kind === 'access') {
      keys.forgetAll()
      return cache.clear()
    }
    keys.forget(change.keyId)
    cache.invalidate(keyPartition(change.keyId))
  }
  cluster?.onInvalidation(apply)
  return (change) => {
    apply(change)
    cluster?.broadcast(change)
  }
}
