import { randomUUID } from 'node:crypto'
import { request as httpRequest, type RequestOptions } from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { LookupFunction } from 'node:net'
import { errorReporter, isStoreOutage, type KernelServices, type Kysely, type Logger } from '../../kernel/sdk.ts'
import type { WebhookTables } from './tables.ts'
import { signatureHeaders } from './signing.ts'
import { AddressRefused, type AddressGuard, type CheckedAddress } from './addressGuard.ts'
import type { WebhookSettings } from './settings.ts'

/** How many sends one process keeps in flight at most. */
const maxInFlight = 64
/**
 * How many sends one webhook may have in flight in one process: a receiver that hangs
 * holds at most this many, so its backlog never fills the bound and every other
 * webhook's due deliveries are claimed at the next poll (a tenant's 20 webhooks hold 40).
 */
const perWebhook = 2
/** How many due rows one poll looks at (it skips those of webhooks already at perWebhook). */
const pollRows = 200
/** A claim outlives its attempt by this much; a crashed sender's claims are taken again after. */
const leaseMarginMs = 30_000
/** What of a receiver's answer is read (the status is what counts). */
const answerBytes = 4096

/** The outcome of one attempt: the receiver's status, or why there was none; `final` fails the delivery now (no retry can succeed). */
interface Outcome {
  status: number | null
  error: string | null
  final?: boolean
}

/** Why an attempt cut short by the service's stop got no answer (retried, same webhook-id). */
export const stoppedError = 'The service stopped before the receiver answered.'

/** The error of a delivery whose webhook was disabled (its pending deliveries fail, docs/webhooks.md). */
export const disabledError = 'The webhook is disabled.'

/**
 * The background sender (issue 17): each process polls for due deliveries and claims
 * each with one conditional UPDATE (its lease owner, until a lease expiry), so with
 * several processes a delivery is sent by one of them; a sender that crashes mid-send
 * loses its claim when the lease runs out and another (or it, restarted) sends again,
 * with the same `webhook-id`. Every state is in the database, so nothing is lost to a
 * restart. A 2xx answer delivers; anything else is retried with exponential backoff
 * and jitter until `retryForMs` after the event, then the delivery is failed.
 *
 * A poll never waits for the sends in flight: it claims what is due up to maxInFlight,
 * at most perWebhook per webhook, so one slow receiver delays nobody else's delivery
 * by more than a poll.
 */
export class WebhookSender {
  private readonly owner = randomUUID()
  private timer: NodeJS.Timeout | null = null
  private polling: Promise<void> | null = null
  /** The sends in flight: delivery id -> its webhook. */
  private readonly inFlight = new Map<string, { webhookId: number; sent: Promise<void> }>()
  private stopped = false
  /** Aborted by stop: a receiver that never answers must not hold the service's stop for timeoutMs. */
  private readonly stopping = new AbortController()

  constructor(
    private readonly db: Kysely<WebhookTables>,
    private readonly kernel: Pick<KernelServices, 'clock' | 'secrets'>,
    private readonly settings: WebhookSettings,
    private readonly guard: AddressGuard,
    /** The plugin's service log: a poll's unexpected failure, a delivery given up on. */
    private readonly log: Logger,
  ) {
    // A database outage fails every poll the same way: one warning per 5 s, not a stack a second.
    this.report = errorReporter(log, isStoreOutage)
  }

  private readonly report: (error: unknown) => void

  start(): void {
    this.timer = setInterval(() => void this.sendDue(), this.settings.pollMs)
    this.timer.unref()
  }

  /** One poll (tests call it): claims what is due, starts sending it, and does not wait for the sends; polls never overlap. */
  sendDue(): Promise<void> {
    if (this.stopped) return Promise.resolve()
    this.polling ??= this.poll().catch(this.report).finally(() => (this.polling = null))
    return this.polling
  }

  private async poll(): Promise<void> {
    if (this.inFlight.size >= maxInFlight) return
    const now = this.kernel.clock()
    const busy = new Map<number, number>()
    for (const { webhookId } of this.inFlight.values()) busy.set(webhookId, (busy.get(webhookId) ?? 0) + 1)
    const full = [...busy].filter(([, count]) => count >= perWebhook).map(([webhookId]) => webhookId)
    const due = await this.db.selectFrom('webhook_deliveries').select(['id', 'webhook_id'])
      .where('status', '=', 'pending').where('next_attempt', '<=', now)
      .where((where) => where.or([where('lease_until', 'is', null), where('lease_until', '<', now)]))
      .$if(full.length > 0, (query) => query.where('webhook_id', 'not in', full))
      .orderBy('next_attempt').limit(pollRows).execute()
    const leaseUntil = now + this.settings.timeoutMs + leaseMarginMs
    for (const { id, webhook_id } of due) {
      const webhookId = Number(webhook_id)
      if (this.stopped || this.inFlight.size >= maxInFlight) break
      if ((busy.get(webhookId) ?? 0) >= perWebhook) continue
      const claim = await this.db.updateTable('webhook_deliveries').set({ lease_owner: this.owner, lease_until: leaseUntil })
        .where('id', '=', id).where('status', '=', 'pending')
        .where((where) => where.or([where('lease_until', 'is', null), where('lease_until', '<', now)]))
        .executeTakeFirst()
      if (Number(claim.numUpdatedRows) !== 1) continue
      busy.set(webhookId, (busy.get(webhookId) ?? 0) + 1)
      const sent = this.deliver(id).catch(this.report).finally(() => this.inFlight.delete(id))
      this.inFlight.set(id, { webhookId, sent })
    }
  }

  private async deliver(id: string): Promise<void> {
    const row = await this.db.selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
      .leftJoin('webhooks as w', 'w.id', 'd.webhook_id')
      .select(['d.attempts', 'd.created', 'e.payload', 'w.url', 'w.secret_enc', 'w.disabled', 'w.id as webhookId'])
      .where('d.id', '=', id).executeTakeFirst()
    if (!row) return
    const outcome: Outcome = row.url === null || row.secret_enc === null || row.webhookId === null
      ? { status: null, error: 'The webhook no longer exists.', final: true }
      : Number(row.disabled) === 1
        ? { status: null, error: disabledError, final: true }
        : await this.send(id, row.url, row.secret_enc, row.webhookId, row.payload)
    await this.record(id, Number(row.attempts) + 1, Number(row.created), outcome)
  }

  private send(id: string, url: string, sealedSecret: string, webhookId: number, payload: string): Promise<Outcome> {
    let secret: string
    try {
      secret = this.kernel.secrets.open(sealedSecret, `webhook:${webhookId}`)
    } catch {
      // Sealed under another master key (restored from elsewhere): no retry opens it; set a new Secret by Edit.
      return Promise.resolve({ status: null, error: "The webhook's secret does not open with this master key; set a new Secret.", final: true })
    }
    return this.attempt(id, url, secret, payload)
  }

  /** One POST, to the address the guard checked, within timeoutMs. */
  private async attempt(id: string, url: string, secret: string, body: string): Promise<Outcome> {
    const target = new URL(url)
    // The operator may have turned allowHttp off since the webhook was made: refused like an address, never sent.
    if (target.protocol !== 'https:' && !this.settings.allowHttp) return { status: null, error: 'Url must start with https://.' }
    let checked: CheckedAddress
    try {
      checked = await this.guard.resolve(target.hostname)
    } catch (error) {
      if (error instanceof AddressRefused) return { status: null, error: error.message }
      throw error
    }
    const headers = {
      ...signatureHeaders(secret, id, Math.floor(this.kernel.clock() / 1000), body),
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'user-agent': 'keygate-webhooks',
    }
    // The connection goes to the checked address whatever DNS says now (no rebinding).
    const pinned: LookupFunction = (_hostname, options, done) => {
      if (options.all) (done as (error: null, addresses: { address: string; family: number }[]) => void)(null, [checked])
      else done(null, checked.address, checked.family)
    }
    const options: RequestOptions = { method: 'POST', headers, lookup: pinned, timeout: this.settings.timeoutMs, signal: AbortSignal.timeout(this.settings.timeoutMs) }
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest
    return new Promise<Outcome>((done) => {
      const request = send(target, options, (response) => {
        let read = 0
        response.on('data', (chunk: Buffer) => {
          read += chunk.length
          if (read > answerBytes) response.destroy()
        })
        const status = response.statusCode ?? 0
        const settle = () => done(status >= 200 && status < 300 ? { status, error: null } : { status, error: `The receiver answered ${status}.` })
        response.on('end', settle)
        response.on('close', settle)
        response.on('error', settle)
      })
      request.on('timeout', () => request.destroy(new Error(`No answer within ${this.settings.timeoutMs} ms.`)))
      const cutShort = () => request.destroy(new Error(stoppedError))
      this.stopping.signal.addEventListener('abort', cutShort, { once: true })
      if (this.stopping.signal.aborted) cutShort() // began while the stop ran: never sent
      request.on('close', () => this.stopping.signal.removeEventListener('abort', cutShort))
      request.on('error', (error: NodeJS.ErrnoException) => done({
        status: null,
        error: this.stopping.signal.aborted ? stoppedError
          : error.name === 'AbortError' ? `No answer within ${this.settings.timeoutMs} ms.` : `${error.code ?? 'Error'}: ${error.message}`.slice(0, 500),
      }))
      request.end(body)
    })
  }

  /** The attempt's outcome, written only while this sender still holds the claim. */
  private async record(id: string, attempts: number, created: number, outcome: Outcome): Promise<void> {
    const now = this.kernel.clock()
    const common = { attempts, last_status: outcome.status, last_error: outcome.error?.slice(0, 500) ?? null, lease_owner: null, lease_until: null }
    const deadline = created + this.settings.retryForMs
    const change = outcome.error === null
      ? { ...common, status: 'delivered' as const, delivered: now }
      : outcome.final || now >= deadline
        ? { ...common, status: 'failed' as const }
        : { ...common, next_attempt: Math.min(deadline, now + this.retryDelay(attempts)) }
    await this.db.updateTable('webhook_deliveries').set(change).where('id', '=', id).where('lease_owner', '=', this.owner).execute()
    if ('status' in change && change.status === 'failed') this.log.warn({ delivery: id, attempts, lastStatus: outcome.status, lastError: outcome.error }, outcome.final ? 'webhook delivery failed' : 'webhook delivery failed: retried for retryForMs')
  }

  /** Exponential backoff with jitter: the n-th retry waits between half and all of first * 2^(n-1), capped. */
  private retryDelay(attempts: number): number {
    const full = Math.min(this.settings.maxRetryDelayMs, this.settings.firstRetryMs * 2 ** Math.min(attempts - 1, 30))
    return Math.round(full / 2 + Math.random() * (full / 2))
  }

  /**
   * Stops polling, cuts the sends in flight short (each is recorded as an attempt without
   * an answer and retried later with the same webhook-id, as after a refused connection)
   * and waits for the poll and those records, so the claims do not wait for their lease.
   */
  async stop(): Promise<void> {
    this.stopped = true
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    await this.polling
    this.stopping.abort()
    await Promise.all([...this.inFlight.values()].map(({ sent }) => sent))
  }
}
