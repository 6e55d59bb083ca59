import { randomUUID } from 'node:crypto'
import type { Invalidation } from '../boot/cluster.ts'
import type { RedisLink } from './redisLink.ts'

/**
 * Cache invalidation between processes and hosts over Redis pub/sub (D16). Every
 * process subscribes at start; a change is applied locally, then PUBLISHed, and the
 * edit answers only once Redis has taken the message (PUBLISH answers after handing
 * it to every subscribed connection). A process ignores its own messages (already
 * applied). When Redis is away the PUBLISH fails fast: the edit still answers and
 * other processes see the change when their key cache entry expires
 * (cache.keyTtlSeconds), which the service log says.
 */
export class RedisInvalidation {
  private readonly origin = randomUUID()
  private readonly channel: string
  private readonly handlers: ((change: Invalidation) => void)[] = []
  private readonly pending = new Set<Promise<unknown>>()

  constructor(private readonly link: RedisLink, private readonly report: (error: unknown) => void, prefix = 'keygate') {
    // Channels are global to a Redis server (not per database number, and ioredis's
    // keyPrefix - `redis://host/0?keyPrefix=team1:` - applies to keys only): both are part of the name.
    const { db = 0, keyPrefix = '' } = link.commands.options
    this.channel = `${keyPrefix}${prefix}:${db}:invalidate`
    link.subscriber.on('message', (channel: string, text: string) => {
      if (channel !== this.channel) return
      let message: { origin: string; change: Invalidation }
      try {
        message = JSON.parse(text)
      } catch {
        return
      }
      if (message.origin === this.origin) return
      for (const handler of this.handlers) handler(message.change)
    })
  }

  /** Subscribes (bounded wait: a start with Redis away goes on and subscribes on reconnect). */
  async start(timeoutMs = 2000): Promise<void> {
    const subscribed = this.link.subscriber.subscribe(this.channel).catch(() => undefined)
    await Promise.race([subscribed, new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())])
  }

  onChange(handler: (change: Invalidation) => void): void {
    this.handlers.push(handler)
  }

  /** Resolves once Redis took the message, or at once when it is away (never rejects). */
  publish(change: Invalidation): Promise<void> {
    const sent = this.link.commands.publish(this.channel, JSON.stringify({ origin: this.origin, change })).then(
      () => undefined,
      () => undefined,
    )
    this.pending.add(sent)
    void sent.finally(() => this.pending.delete(sent))
    return sent
  }

  /** What is still being published, or undefined when nothing is (the common case: no promise). */
  inFlight(): Promise<void> | undefined {
    return this.pending.size === 0 ? undefined : Promise.all([...this.pending]).then(() => undefined)
  }
}
