import type { KeyDirectory } from '../auth/keyDirectory.ts'
import type { ResponseCache } from '../http/responseCache.ts'
import type { ClusterLink, Invalidation } from './cluster.ts'
import type { RedisInvalidation } from '../cluster/redisInvalidation.ts'
import type { AccessStamp } from '../cluster/accessStamp.ts'
import type { PartitionChanges } from '../cluster/partitionChanges.ts'
import { Underway } from '../cluster/underway.ts'

/** The response-cache partition of everything cached for one key; dropped when that key changes. */
export const keyPartition = (keyId: number) => `key:${keyId}`

/** Applies and spreads a change; `spread()` waits for every change's spreading still under way. */
export interface Invalidator {
  (change: Invalidation): Promise<void>
  /**
   * Resolves once no change is still being spread: with Redis, a publish whose follow-up
   * may yet write the database's stamp or partition change (the operator CLI does not
   * wait for its changes' spreading; its stop must, before it closes the database).
   */
  spread(): Promise<void>
}

/**
 * Forgetting what a change made stale: a key's auth record and cached answers, every
 * loaded key and cached answer (an ACL or group change), or one cache partition. Applied here and
 * on every other process: through Redis pub/sub when configured (every process and
 * cluster worker subscribes itself; the returned promise waits for the publish), else
 * in cluster mode through the primary, and for key and access changes through the
 * database's stamp too (cluster/accessStamp.ts), which the operator CLI writes; with
 * Redis, the stamp carries what Redis could not: an outage, or a process it did not
 * reach (fewer processes acknowledged it than `subscribers` says there are: one whose
 * link is down or hung, or whose subscription is being made again). A partition change
 * that Redis did not carry to every process (or every partition change, without Redis)
 * goes to the others through the database's partition changes (cluster/partitionChanges.ts,
 * MySQL/MariaDB: the database several hosts share).
 */
export function invalidation(
  keys: KeyDirectory,
  cache: ResponseCache,
  cluster: ClusterLink | undefined,
  redis?: RedisInvalidation,
  stamp?: AccessStamp,
  subscribers: () => Promise<number> = async () => 0,
  partitions?: PartitionChanges,
): Invalidator {
  const apply = (change: Invalidation) => {
    if (change.kind === 'partition') return cache.invalidate(change.partition)
    if (change.kind === 'access') {
      keys.forgetAll()
      return cache.clear()
    }
    keys.forget(change.keyId)
    cache.invalidate(keyPartition(change.keyId))
  }
  if (redis) {
    redis.onChange(apply)
    const spreading = new Underway()
    const invalidate = (change: Invalidation) => {
      apply(change)
      // Redis away, or a process it missed: the database's stamp carries a key or access
      // change to it instead (read every few seconds).
      const spread = redis.publish(change).then(async (applied) => {
        if (change.kind === 'partition' ? !partitions : !stamp) return
        if (applied !== null && applied >= (await subscribers().catch(() => Infinity))) return
        if (change.kind === 'partition') partitions!.record(change.partition)
        else stamp!.mark()
      })
      return spreading.add(spread)
    }
    return Object.assign(invalidate, { spread: async () => spreading.settled() })
  }
  cluster?.onInvalidation(apply)
  const invalidate = (change: Invalidation) => {
    apply(change)
    cluster?.broadcast(change)
    // Without Redis, processes that are not this one's cluster (the operator CLI's
    // changes, a service on another host) meet through the database's stamp.
    if (change.kind !== 'partition') stamp?.mark()
    else partitions?.record(change.partition)
    return Promise.resolve()
  }
  return Object.assign(invalidate, { spread: () => Promise.resolve() })
}

/**
 * What the call that made a change waits for before it answers (publishChanges stage):
 * the Redis publish and its acknowledgements, or else in cluster mode the other
 * workers' acknowledgements, so that the next call on any process sees the change.
 */
export function changesInFlight(redis: RedisInvalidation | undefined, cluster: ClusterLink | undefined): (() => Promise<void> | undefined) | undefined {
  if (redis) return () => redis.inFlight()
  if (cluster) return () => cluster.inFlight()
  return undefined
}
