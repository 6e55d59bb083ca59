import { createRequire } from 'node:module'
import type { Redis } from 'ioredis'
import type { Logger } from '../observe/logger.ts'
import { maskedUrl } from '../boot/config.ts'

/** A command unanswered this long fails (then the call counts per process); Redis answers loopback commands in well under 1 ms. */
const commandTimeoutMs = 1000
/** How often the command connection is checked for a Redis that holds the socket open but answers nothing. */
const watchEveryMs = 1000

/** Redis's answers to a wrong, missing or unwanted password (AUTH): WRONGPASS, NOAUTH, ERR AUTH ... */
const credentialRefusal = /^(WRONGPASS|NOAUTH)\b|^ERR (AUTH|invalid password|Client sent AUTH)/i

/**
 * The kernel's connections to Redis (D16): one for commands (limits, PUBLISH) and one
 * for the invalidation subscription (a subscribed connection can send nothing else).
 * Commands are never queued while Redis is away (enableOfflineQueue off): a call must
 * not wait for a reconnect, the per-process insurance limiter answers instead.
 * ioredis reconnects by itself; the outage and the return are each logged once.
 *
 * A Redis that stops answering without closing its sockets (paused, swapping, a host
 * gone without a reset) is an outage too: every command is bounded (commandTimeout),
 * and a PING a second that goes unanswered drops the connection, so calls fail fast
 * and count per process until Redis answers again, as when it refuses connections.
 */
export class RedisLink {
  readonly commands: Redis
  readonly subscriber: Redis
  /** null until the first connection attempt ends. */
  private up: boolean | null = null
  /** Told when the first connection attempt ends (`up` set), whichever way. */
  private readonly firstAttempt: (() => void)[] = []
  private closed = false
  private readonly watch: NodeJS.Timeout

  constructor(url: string, private readonly logger: Logger) {
    const options = {
      enableOfflineQueue: false,
      // A command on a dead socket fails fast instead of waiting for the reconnect.
      maxRetriesPerRequest: 0,
      connectTimeout: 2000,
      commandTimeout: commandTimeoutMs,
      // disconnect() ends the socket and destroys it after this long if it has not closed;
      // a socket Redis refused has closed already and never closes again, so ioredis's
      // 2 s default held every operator CLI run (and a stop) that long while Redis was away.
      disconnectTimeout: 100,
      // ioredis names itself with CLIENT SETINFO on connecting; a Redis before 7.2 refuses
      // that, and a refused command keeps its commandTimeout timer running, which held every
      // operator CLI run (and a quick stop) up to 1 s after its work was done.
      disableClientInfo: true,
      retryStrategy: (attempt: number) => Math.min(attempt * 200, 2000),
      lazyConnect: false,
    }
    // Loaded only here: a service without Redis does not carry the client's code (about 10 MB of RSS).
    const { Redis } = createRequire(import.meta.url)('ioredis') as typeof import('ioredis')
    this.commands = new Redis(url, options)
    // The subscriber keeps its offline queue: its SUBSCRIBE is replayed on every reconnect.
    // Nor is its SUBSCRIBE timed out: sent, it holds once Redis answers, however late.
    this.subscriber = new Redis(url, { ...options, enableOfflineQueue: true, maxRetriesPerRequest: null, commandTimeout: undefined })
    const shown = maskedUrl(url)
    this.commands.on('ready', () => {
      if (this.up === true) return
      if (this.up === false) this.logger.warn({ redis: shown }, 'redis reachable again: rate limits and cache invalidation are shared again')
      // Debug only: the operator CLI's stdout carries its answers (a day code), not this.
      else this.logger.debug({ redis: shown }, 'redis connected: rate limits and cache invalidation are shared')
      this.up = true
      this.attemptEnded()
    })
    // Said once per outage (or once when unreachable at start), not once per retry.
    const down = (refusal?: string) => {
      if (this.up === false || this.closed) return
      this.up = false
      // A wrong or missing password is the operator's to mend, not an outage to wait out.
      const what = refusal === undefined ? 'redis unreachable' : `redis refused the credentials of REDIS_URL (${refusal})`
      this.logger.error({ redis: shown }, `${what}: rate limits are counted per process and cache changes are not shared until it returns`)
      this.attemptEnded()
    }
    this.commands.on('close', down)
    this.commands.on('error', (error: Error) => {
      // A database number this Redis does not have: ioredis reports it, then goes on in db 0,
      // where another service's counters may be. Given up on instead, as if Redis were away.
      if (/DB index is out of range/i.test(error.message) && !this.closed) {
        this.logger.error({ redis: shown }, `redis: REDIS_URL names database ${new URL(url).pathname.slice(1)}, which this Redis does not have (its databases setting); not used: rate limits are counted per process and cache changes are not shared`)
        this.up = false
        this.attemptEnded()
        void this.close()
        return
      }
      down(credentialRefusal.test(error.message) ? error.message : undefined)
    })
    this.subscriber.on('error', () => {})
    this.watch = setInterval(() => {
      if (this.commands.status !== 'ready') return
      this.commands.ping().catch((error: Error) => {
        if (!/timed out/i.test(error.message) || this.closed) return
        down()
        // Reconnecting: until Redis answers the ready check, status is not 'ready', so every
        // command (and every limit count, which checks the status first) fails at once.
        this.commands.disconnect(true)
      })
    }, watchEveryMs)
    this.watch.unref()
  }

  /** True while commands reach Redis. */
  get reachable(): boolean {
    return this.up === true && this.commands.status === 'ready'
  }

  private attemptEnded(): void {
    for (const done of this.firstAttempt.splice(0)) done()
  }

  /**
   * Waits (bounded) for the first connection attempt, so a start with Redis up begins
   * shared. A refused attempt ends the wait at once: waiting longer gains nothing (ioredis
   * goes on retrying), and the operator CLI would pay it on every command while Redis is away.
   */
  async connected(timeoutMs = 2000): Promise<void> {
    if (this.up !== null) return
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, timeoutMs)
      function done() {
        clearTimeout(timer)
        resolve()
      }
      this.firstAttempt.push(done)
    })
  }

  async close(): Promise<void> {
    this.closed = true
    clearInterval(this.watch)
    this.commands.disconnect()
    this.subscriber.disconnect()
  }
}
