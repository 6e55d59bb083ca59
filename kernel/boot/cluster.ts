/**
 * Cluster mode (`workers` > 1): one primary process and N workers on one port
 * (node:cluster). What must agree across workers goes through the primary over IPC:
 * rate-limit counts (the primary holds the only counters) and cache invalidations
 * (a key edited on one worker is forgotten on all at once: the edit answers once every
 * other worker said it applied the change, as with Redis).
 */
import cluster, { type Worker } from 'node:cluster'
import { RateLimiterRes } from 'rate-limiter-flexible'
import { CountedRes, MemoryWindowLimiter, makeRoomForWindow, windowsMax, type LimiterFactory, type WindowLimiter } from '../limits/rateLimits.ts'

export type Invalidation = { kind: 'partition'; partition: string } | { kind: 'key'; keyId: number } | { kind: 'access' }

/** A worker's line to its siblings. */
export interface ClusterLink {
  broadcast(invalidation: Invalidation): void
  onInvalidation(handler: (invalidation: Invalidation) => void): void
  /** The broadcasts not yet applied by every other worker (undefined when none), for the publishChanges stage. */
  inFlight(): Promise<void> | undefined
  limiters: LimiterFactory
}

/**
 * How long an edit waits for its siblings at most: a hung worker cannot hold edits
 * (the database's change stamp still reaches it within a few seconds).
 */
const ackTimeoutMs = 1000

type LimiterOperation = 'consume' | 'giveBack' | 'get'
/** `windowEnd`: of a give-back, the window the point was taken in (the primary's CountedRes.windowEnd). */
interface LimiterRequest { type: 'keygate:limit'; id: number; operation: LimiterOperation; points: number; duration: number; keyPrefix: string; key: string | number; amount: number; windowEnd?: number }
interface LimiterReply { type: 'keygate:limit-reply'; id: number; result: (ReturnType<RateLimiterRes['toJSON']> & { windowEnd?: number }) | null; refused: boolean }
/** Worker -> primary -> every other worker; each of them answers an ack, and the primary tells the sender `done` once all did. */
interface BroadcastMessage { type: 'keygate:invalidate'; id: number; invalidation: Invalidation }
interface BroadcastAck { type: 'keygate:invalidate-ack'; id: number; origin: number }
interface BroadcastDone { type: 'keygate:invalidate-done'; id: number }
interface RelayedMessage extends BroadcastMessage { origin: number }

/** A consume's answer keeps the window it names, so a give-back through this worker's limiter reaches that window only. */
function revive(json: NonNullable<LimiterReply['result']>, limiter: WindowLimiter): RateLimiterRes {
  return json.windowEnd === undefined
    ? new RateLimiterRes(json.remainingPoints, json.msBeforeNext, json.consumedPoints, json.isFirstInDuration)
    : new CountedRes(json.remainingPoints, json.msBeforeNext, json.consumedPoints, json.isFirstInDuration, json.windowEnd, limiter)
}

/** In a worker: the link to the primary. */
export function workerLink(): ClusterLink {
  let nextId = 0
  const waiting = new Map<number, { limiter: WindowLimiter; resolve: (result: RateLimiterRes | null) => void; reject: (result: RateLimiterRes) => void }>()
  const handlers: ((invalidation: Invalidation) => void)[] = []
  let nextBroadcast = 0
  // The broadcasts not yet applied by every other worker: `done` ends one (the primary's word, or the timeout).
  const broadcasts = new Map<number, { applied: Promise<void>; done: () => void }>()
  process.on('message', (message: LimiterReply | RelayedMessage | BroadcastDone) => {
    if (message?.type === 'keygate:invalidate-done') {
      broadcasts.get(message.id)?.done()
    } else if (message?.type === 'keygate:limit-reply') {
      const pending = waiting.get(message.id)
      if (!pending) return
      waiting.delete(message.id)
      const result = message.result === null ? null : revive(message.result, pending.limiter)
      if (message.refused) pending.reject(result!)
      else pending.resolve(result)
    } else if (message?.type === 'keygate:invalidate') {
      for (const handler of handlers) handler(message.invalidation)
      process.send!({ type: 'keygate:invalidate-ack', id: message.id, origin: message.origin } satisfies BroadcastAck)
    }
  })
  const ask = (limiter: WindowLimiter, request: Omit<LimiterRequest, 'type' | 'id'>) =>
    new Promise<RateLimiterRes | null>((resolve, reject) => {
      const id = nextId++
      waiting.set(id, { limiter, resolve, reject })
      process.send!({ type: 'keygate:limit', id, ...request } satisfies LimiterRequest)
    })
  return {
    // The call that made the change answers only once the siblings applied it (publishChanges
    // stage): otherwise the next call, on another worker, could still pass with a disabled key.
    broadcast: (invalidation) => {
      const id = nextBroadcast++
      let done = () => {}
      const applied = new Promise<void>((resolve) => {
        const timer = setTimeout(() => done(), ackTimeoutMs)
        done = () => {
          clearTimeout(timer)
          broadcasts.delete(id)
          resolve()
        }
      })
      broadcasts.set(id, { applied, done })
      process.send!({ type: 'keygate:invalidate', id, invalidation } satisfies BroadcastMessage)
    },
    inFlight: () => (broadcasts.size === 0 ? undefined : Promise.all([...broadcasts.values()].map((broadcast) => broadcast.applied)).then(() => undefined)),
    onInvalidation: (handler) => handlers.push(handler),
    limiters: (options): WindowLimiter => {
      const limiter: WindowLimiter = {
        consume: (key, amount = 1) => ask(limiter, { operation: 'consume', ...options, key, amount }) as Promise<RateLimiterRes>,
        giveBack: async (key, taken, amount = 1) => {
          if (taken instanceof CountedRes && taken.countedBy === limiter) await ask(limiter, { operation: 'giveBack', ...options, key, amount, windowEnd: taken.windowEnd })
        },
        get: (key) => ask(limiter, { operation: 'get', ...options, key, amount: 0 }),
      }
      return limiter
    },
  }
}

/** In the primary: answers the workers' limiter calls and relays invalidations. */
export function servePrimary(clock: () => number = Date.now): void {
  const limiters = new Map<string, MemoryWindowLimiter>()
  const limiterFor = (request: LimiterRequest) => {
    const name = `${request.keyPrefix}|${request.points}|${request.duration}`
    let limiter = limiters.get(name)
    if (!limiter) {
      // Bounded as the workers' windows are: idle windows go, then the oldest (keys and tenant quotas, hence twice).
      makeRoomForWindow(limiters, 2 * windowsMax)
      limiters.set(name, (limiter = new MemoryWindowLimiter(request.points, request.duration * 1000, clock)))
    }
    return limiter
  }
  // Each relayed broadcast (by sender worker id and its own id): the workers that have yet to apply it.
  const relayed = new Map<string, { origin: Worker; id: number; waitingFor: Set<number> }>()
  const settle = (name: string) => {
    const entry = relayed.get(name)!
    if (entry.waitingFor.size > 0) return
    relayed.delete(name)
    if (entry.origin.isConnected()) entry.origin.send({ type: 'keygate:invalidate-done', id: entry.id } satisfies BroadcastDone)
  }
  // A worker that exits owes no more acknowledgements.
  cluster.on('exit', (worker: Worker) => {
    for (const [name, entry] of relayed) if (entry.waitingFor.delete(worker.id)) settle(name)
  })
  cluster.on('message', (worker: Worker, message: LimiterRequest | BroadcastMessage | BroadcastAck) => {
    if (message?.type === 'keygate:invalidate') {
      const name = `${worker.id}:${message.id}`
      const others = Object.values(cluster.workers ?? {}).filter((other): other is Worker => other !== undefined && other !== worker && other.isConnected())
      relayed.set(name, { origin: worker, id: message.id, waitingFor: new Set(others.map((other) => other.id)) })
      for (const other of others) other.send({ ...message, origin: worker.id } satisfies RelayedMessage)
      settle(name)
      // The sender stops waiting after ackTimeoutMs; so does this entry, whatever a hung worker owes.
      setTimeout(() => relayed.delete(name), ackTimeoutMs).unref()
      return
    }
    if (message?.type === 'keygate:invalidate-ack') {
      const name = `${message.origin}:${message.id}`
      if (relayed.get(name)?.waitingFor.delete(worker.id)) settle(name)
      return
    }
    if (message?.type !== 'keygate:limit') return
    const limiter = limiterFor(message)
    const operation = message.operation === 'consume' ? limiter.consume(message.key, message.amount)
      : message.operation === 'giveBack' ? Promise.resolve(limiter.giveBackNow(message.key, message.amount, message.windowEnd!)).then(() => null)
      : limiter.get(message.key)
    const reply = (result: RateLimiterRes | null, refused: boolean) => {
      const json = result === null ? null : result instanceof CountedRes ? { ...result.toJSON(), windowEnd: result.windowEnd } : result.toJSON()
      if (worker.isConnected()) worker.send({ type: 'keygate:limit-reply', id: message.id, result: json, refused } satisfies LimiterReply)
    }
    operation.then((result) => reply(result, false), (result: RateLimiterRes) => reply(result, true))
  })
}
