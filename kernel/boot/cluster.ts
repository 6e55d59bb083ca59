/**
 * Cluster mode (`workers` > 1): one primary process and N workers on one port
 * (node:cluster). What must agree across workers goes through the primary over IPC:
 * rate-limit counts (the primary holds the only counters) and cache invalidations
 * (a key edited on one worker is forgotten on all at once).
 */
import cluster, { type Worker } from 'node:cluster'
import { RateLimiterRes } from 'rate-limiter-flexible'
import { CountedRes, MemoryWindowLimiter, type LimiterFactory, type WindowLimiter } from '../limits/rateLimits.ts'

export type Invalidation = { kind: 'partition'; partition: string } | { kind: 'key'; keyId: number } | { kind: 'access' }

/** A worker's line to its siblings. */
export interface ClusterLink {
  broadcast(invalidation: Invalidation): void
  onInvalidation(handler: (invalidation: Invalidation) => void): void
  limiters: LimiterFactory
}

type LimiterOperation = 'consume' | 'giveBack' | 'get'
/** `windowEnd`: of a give-back, the window the point was taken in (the primary's CountedRes.windowEnd). */
interface LimiterRequest { type: 'keygate:limit'; id: number; operation: LimiterOperation; points: number; duration: number; keyPrefix: string; key: string | number; amount: number; windowEnd?: number }
interface LimiterReply { type: 'keygate:limit-reply'; id: number; result: (ReturnType<RateLimiterRes['toJSON']> & { windowEnd?: number }) | null; refused: boolean }
interface BroadcastMessage { type: 'keygate:invalidate'; invalidation: Invalidation }

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
  process.on('message', (message: LimiterReply | BroadcastMessage) => {
    if (message?.type === 'keygate:limit-reply') {
      const pending = waiting.get(message.id)
      if (!pending) return
      waiting.delete(message.id)
      const result = message.result === null ? null : revive(message.result, pending.limiter)
      if (message.refused) pending.reject(result!)
      else pending.resolve(result)
    } else if (message?.type === 'keygate:invalidate') {
      for (const handler of handlers) handler(message.invalidation)
    }
  })
  const ask = (limiter: WindowLimiter, request: Omit<LimiterRequest, 'type' | 'id'>) =>
    new Promise<RateLimiterRes | null>((resolve, reject) => {
      const id = nextId++
      waiting.set(id, { limiter, resolve, reject })
      process.send!({ type: 'keygate:limit', id, ...request } satisfies LimiterRequest)
    })
  return {
    broadcast: (invalidation) => process.send!({ type: 'keygate:invalidate', invalidation } satisfies BroadcastMessage),
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
    if (!limiter) limiters.set(name, (limiter = new MemoryWindowLimiter(request.points, request.duration * 1000, clock)))
    return limiter
  }
  cluster.on('message', (worker: Worker, message: LimiterRequest | BroadcastMessage) => {
    if (message?.type === 'keygate:invalidate') {
      for (const other of Object.values(cluster.workers ?? {})) if (other && other !== worker) other.send(message)
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
