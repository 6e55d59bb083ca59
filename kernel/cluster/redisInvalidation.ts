import { randomUUID } from 'node:crypto'
import type { Invalidation } from '../boot/cluster.ts'
import type { RedisLink } from './redisLink.ts'
import { Underway } from './underway.ts'

/** How long an edit waits for the other processes' acknowledgements at most. */
const ackTimeoutMs = 1000

interface Waiting { acks: number; expected: number | null; done: () => void }

/**
 * Cache invalidation between processes and hosts over Redis pub/sub (D16). Every
 * process subscribes at start. A change is applied locally, then PUBLISHed; every
 * subscribed process applies it and acknowledges on a second channel, and the edit
 * answers once as many acknowledgements came as PUBLISH counted receivers (PUBLISH's
 * own reply only says Redis handed the message over, not that it was applied: the next
 * call on another process could still win that race). Bounded by ackTimeoutMs, so a
 * process that hangs cannot hold edits. When Redis is away the PUBLISH fails fast: the
 * edit still answers and other processes see the change when their key cache entry
 * expires (cache.keyTtlSeconds), which the service log says.
 */
export class RedisInvalidation {
  private readonly origin = randomUUID()
  private readonly channel: string
  private readonly ackChannel: string
  private readonly handlers: ((change: Invalidation) => void)[] = []
  private readonly pending = new Underway()
  private readonly waiting = new Map<string, Waiting>()
  private sequence = 0

  constructor(private readonly link: RedisLink, private readonly report: (error: unknown) => void, prefix = 'keygate') {
    // Channels are global to a Redis server (not per database number, and ioredis's
    // keyPrefix - `redis://host/0?keyPrefix=team1:` - applies to keys only): both are part of the name.
    const { db = 0, keyPrefix = '' } = link.commands.options
    this.channel = `${keyPrefix}${prefix}:${db}:invalidate`
    this.ackChannel = `${this.channel}:ack`
    link.subscriber.on('message', (channel: string, text: string) => {
      if (channel === this.ackChannel) return this.acknowledged(text)
      if (channel !== this.channel) return
      let message: { id: string; origin: string; change: Invalidation }
      try {
        message = JSON.parse(text)
      } catch {
        return
      }
      // Our own change was applied before it was published.
      if (message.origin !== this.origin) for (const handler of this.handlers) handler(message.change)
      this.link.commands.publish(this.ackChannel, message.id).catch(() => undefined)
    })
    // A subscription lost and made again may have missed changes in between: everything
    // loaded or cached may be stale, so all of it is dropped (as an ACL change would).
    let lost = false
    link.subscriber.on('close', () => (lost = true))
    link.subscriber.on('ready', () => {
      if (!lost) return
      lost = false
      for (const handler of this.handlers) handler({ kind: 'access' })
    })
  }

  private acknowledged(id: string): void {
    const waiting = this.waiting.get(id)
    if (!waiting) return
    waiting.acks++
    if (waiting.expected !== null && waiting.acks >= waiting.expected) waiting.done()
  }

  /**
   * Subscribes (bounded wait: a start with Redis away goes on and subscribes on reconnect;
   * once the first connection attempt was refused it goes on at once, not after the bound).
   */
  async start(timeoutMs = 2000): Promise<void> {
    const subscribed = this.link.subscriber.subscribe(this.channel, this.ackChannel).catch(() => undefined)
    const refused = this.link.connected(timeoutMs).then(() => (this.link.reachable ? subscribed : undefined))
    await Promise.race([subscribed, refused, new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())])
  }

  onChange(handler: (change: Invalidation) => void): void {
    this.handlers.push(handler)
  }

  /**
   * Resolves once every subscribed process applied it (or the bound passed), at once when
   * Redis is away; never rejects. How many processes said they applied it (this one's
   * included; one cut off behind a hung link never says so, though Redis counts it a
   * receiver), or null when Redis did not take it.
   */
  publish(change: Invalidation): Promise<number | null> {
    const id = `${this.origin}:${this.sequence++}`
    const sent = new Promise<number | null>((resolve) => {
      let timer: NodeJS.Timeout | undefined
      let published = false
      const done = () => {
        clearTimeout(timer)
        this.waiting.delete(id)
        resolve(published ? waiting.acks : null)
      }
      // Registered before PUBLISH: an acknowledgement may arrive (on the subscriber's
      // socket) before PUBLISH's reply does (on the command socket).
      const waiting: Waiting = { acks: 0, expected: null, done }
      this.waiting.set(id, waiting)
      this.link.commands.publish(this.channel, JSON.stringify({ id, origin: this.origin, change })).then(
        (delivered) => {
          published = true
          waiting.expected = delivered
          if (waiting.acks >= delivered) return done()
          timer = setTimeout(done, ackTimeoutMs)
        },
        () => done(),
      )
    })
    return this.pending.add(sent)
  }

  /** What is still being published, or undefined when nothing is (the common case: no promise). */
  inFlight(): Promise<void> | undefined {
    return this.pending.settled()
  }
}
