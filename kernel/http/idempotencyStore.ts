import type { Kysely } from 'kysely'
import type { SecretBox } from '../auth/secrets.ts'
import type { CoreTables } from '../storage/coreTables.ts'
import { isUniqueViolation } from '../storage/database.ts'
import type { Answer } from './exchange.ts'
import { bodyBytes } from './bodyPieces.ts'

/** How long a stored answer serves retries (issue 12: as payment APIs do, 24 hours). */
export const idempotencyTtlMs = 24 * 3_600_000

/**
 * The context a stored answer is sealed with: bound to its key and Idempotency-Key, so
 * a body copied onto another row does not open. The answer of a create, edit or
 * rotation holds a live Api_Secret, so a database dump must not read it (D9).
 */
export function idempotencyContext(keyId: number, idemKey: string): string {
  return `idempotency:${keyId}:${idemKey}`
}

/** A claim this call holds: what `settle` needs to end it. */
export interface ClaimTicket {
  keyId: number
  idemKey: string
  requestHash: string
  /**
   * The claim row's `created_at` as this process last wrote it (renewed while the call
   * runs): the claim is still this call's while the row holds it, and no longer once a
   * retry took the row over (its process was gone that long, so the row is the retry's).
   */
  heldAt: number
}

export type Claim =
  | { kind: 'claimed'; ticket: ClaimTicket }
  | { kind: 'stored'; answer: Answer }
  | { kind: 'running' }
  | { kind: 'mismatch' }

/**
 * Answers of writes sent with an Idempotency-Key, per key, in the database, so every
 * process serving the key sees them and a restart loses none. A claim is a row written
 * before the work starts (the primary key makes two racing claims one); the answer is
 * stored after it. While the call runs, its process renews the claim (its `created_at`)
 * every quarter of `abandonedAfterMs`, so a call that runs longer than that (a slow
 * database, a short `timeouts.requestMs`) keeps its key and a retry answers 409 instead
 * of doing the work a second time beside it. A claim whose process died stops being
 * renewed and is taken over once `abandonedAfterMs` has passed since it last was; the
 * end of a claim taken over that way no longer touches the row (it is the retry's).
 * Stored bodies are sealed under the master key (idempotencyContext).
 */
/** How often a settlement the database refused is tried again, at the most. */
const settleRetryMaxMs = 5000

/**
 * A claim's end the database refused: the answer to store (the work was done and
 * answered) or null to free the claim (the call was refused or failed).
 */
interface UnsettledClaim extends ClaimTicket {
  answer: Answer | null
}

/** A claim this process holds while its call runs, and its renewal in flight (never rejects). */
interface HeldClaim {
  ticket: ClaimTicket
  renewing: Promise<void> | null
}

/** The in-memory name of a key's claim: one Idempotency-Key per API key. */
function claimId(keyId: number, idemKey: string): string {
  return `${keyId} ${idemKey}`
}

export class IdempotencyStore {
  private purgeTimer: NodeJS.Timeout | null = null
  /** By `keyId idemKey`: settlements this process goes on trying until the database takes them. */
  private readonly unsettled = new Map<string, UnsettledClaim>()
  private retryTimer: NodeJS.Timeout | null = null
  private retryDelayMs = 250
  /** By `keyId idemKey`: claims of calls this process is running, renewed until they settle. */
  private readonly held = new Map<string, HeldClaim>()
  private renewTimer: NodeJS.Timeout | null = null

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly secrets: Pick<SecretBox, 'seal' | 'open'>,
    private readonly clock: () => number,
    private readonly abandonedAfterMs: number,
    private readonly report: (error: unknown) => void,
  ) {}

  /** How often held claims are renewed: well inside `abandonedAfterMs`, so a slow renewal still lands in time. */
  private get renewEveryMs(): number {
    return Math.max(1, Math.floor(this.abandonedAfterMs / 4))
  }

  async claim(keyId: number, idemKey: string, requestHash: string): Promise<Claim> {
    const id = claimId(keyId, idemKey)
    const unsettled = this.unsettled.get(id)
    if (unsettled) {
      // This process answered it and could not yet write how it ended: that answer stands.
      if (unsettled.answer !== null) return unsettled.requestHash === requestHash ? { kind: 'stored', answer: unsettled.answer } : { kind: 'mismatch' }
      // A freed claim: free it now (a database still away fails this call with 503) and go on.
      await this.settleNow(unsettled)
      this.unsettled.delete(id)
    }
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = this.clock()
      const row = await this.db.selectFrom('api_idempotency').selectAll().where('key_id', '=', keyId).where('idem_key', '=', idemKey).executeTakeFirst()
      if (row) {
        const createdAt = Number(row.created_at)
        const expired = createdAt <= now - idempotencyTtlMs
        const abandoned = Number(row.status) === 0 && createdAt <= now - this.abandonedAfterMs
        if (!expired && row.request_hash !== requestHash) return { kind: 'mismatch' }
        if (!expired && !abandoned) {
          if (Number(row.status) === 0) return { kind: 'running' }
          return { kind: 'stored', answer: this.storedAnswer(row, keyId, idemKey) }
        }
        // Old enough to be forgotten: only the row as read is removed, so a racing claim stands.
        await this.db.deleteFrom('api_idempotency').where('key_id', '=', keyId).where('idem_key', '=', idemKey).where('created_at', '=', createdAt).execute()
      }
      try {
        await this.db.insertInto('api_idempotency').values({ key_id: keyId, idem_key: idemKey, request_hash: requestHash, status: 0, content_type: null, headers: null, body: null, created_at: now }).execute()
        const ticket: ClaimTicket = { keyId, idemKey, requestHash, heldAt: now }
        this.hold(id, ticket)
        return { kind: 'claimed', ticket }
      } catch (error) {
        if (!isUniqueViolation(error)) throw error
        // Another call claimed it first: look again.
      }
    }
    return { kind: 'running' }
  }

  /**
   * Ends a claim: stores the answer of a call that succeeded, or (answer null) frees the
   * claim of one that was refused (4xx) or failed on our side (5xx), so the key may be
   * retried as new. Never rejects. When the database refuses, the work must still not be
   * done twice nor the key stay blocked: this process answers retries from memory and
   * writes the end again, every few seconds, until the database takes it.
   */
  async settle(ticket: ClaimTicket, answer: Answer | null): Promise<void> {
    // A renewal in flight moves `heldAt`: the end waits for it, or it would miss its own row.
    await this.release(ticket)
    const claim: UnsettledClaim = { ...ticket, answer }
    try {
      await this.settleNow(claim)
    } catch (error) {
      this.report(error)
      this.unsettled.set(claimId(ticket.keyId, ticket.idemKey), claim)
      this.scheduleRetry()
    }
  }

  /** Ends this claim only: a row another call took over since (status 0, another `created_at`) or already ended is left alone. */
  private async settleNow({ keyId, idemKey, heldAt, answer }: UnsettledClaim): Promise<void> {
    if (answer === null) {
      await this.db.deleteFrom('api_idempotency').where('key_id', '=', keyId).where('idem_key', '=', idemKey).where('status', '=', 0).where('created_at', '=', heldAt).execute()
      return
    }
    await this.db.updateTable('api_idempotency')
      .set({ status: answer.status, content_type: answer.contentType, headers: JSON.stringify(answer.headers), body: this.secrets.seal(bodyBytes(answer.body).toString('base64'), idempotencyContext(keyId, idemKey)) })
      .where('key_id', '=', keyId).where('idem_key', '=', idemKey).where('status', '=', 0).where('created_at', '=', heldAt).execute()
  }

  private hold(id: string, ticket: ClaimTicket): void {
    this.held.set(id, { ticket, renewing: null })
    if (this.renewTimer !== null) return
    this.renewTimer = setInterval(() => this.renewHeld(), this.renewEveryMs)
    this.renewTimer.unref()
  }

  private async release(ticket: ClaimTicket): Promise<void> {
    const id = claimId(ticket.keyId, ticket.idemKey)
    const holding = this.held.get(id)
    if (holding === undefined || holding.ticket !== ticket) return
    this.held.delete(id)
    if (this.held.size === 0 && this.renewTimer !== null) {
      clearInterval(this.renewTimer)
      this.renewTimer = null
    }
    await holding.renewing
  }

  /**
   * Renews the claims held longer than a renewal period (most calls end well before
   * their first: they cost no write). Only the row as this call holds it is renewed; a
   * renewal the database refuses is tried again at the next tick.
   */
  private renewHeld(): void {
    const now = this.clock()
    for (const holding of this.held.values()) {
      const { ticket } = holding
      if (holding.renewing !== null || ticket.heldAt > now - this.renewEveryMs) continue
      holding.renewing = this.db.updateTable('api_idempotency').set({ created_at: now })
        .where('key_id', '=', ticket.keyId).where('idem_key', '=', ticket.idemKey).where('status', '=', 0).where('created_at', '=', ticket.heldAt)
        .executeTakeFirst()
        .then((result) => {
          if (Number(result.numUpdatedRows) > 0) ticket.heldAt = now
        }, () => undefined)
        .finally(() => (holding.renewing = null))
    }
  }

  private scheduleRetry(): void {
    if (this.retryTimer !== null) return
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null
      void this.retryUnsettled()
    }, this.retryDelayMs)
    this.retryTimer.unref()
  }

  private async retryUnsettled(): Promise<void> {
    for (const [id, claim] of this.unsettled) {
      try {
        await this.settleNow(claim)
        this.unsettled.delete(id)
      } catch {
        // Still away: the first failure was reported; back off and try again.
        this.retryDelayMs = Math.min(this.retryDelayMs * 2, settleRetryMaxMs)
        return this.scheduleRetry()
      }
    }
    this.retryDelayMs = 250
  }

  startPurging(everyMs: number): void {
    this.purgeTimer = setInterval(() => {
      this.db.deleteFrom('api_idempotency').where('created_at', '<', this.clock() - idempotencyTtlMs).execute().catch(this.report)
    }, everyMs)
    this.purgeTimer.unref()
  }

  stop(): void {
    if (this.purgeTimer) clearInterval(this.purgeTimer)
    if (this.renewTimer) clearInterval(this.renewTimer)
    if (this.retryTimer) clearTimeout(this.retryTimer)
  }

  private storedAnswer(row: { status: number; content_type: string | null; headers: string | null; body: string | null }, keyId: number, idemKey: string): Answer {
    // A body stored before answers were sealed (version 0.3.2 and older) is plain base64.
    const body = row.body === null ? '' : row.body.startsWith('v1:') ? this.secrets.open(row.body, idempotencyContext(keyId, idemKey)) : row.body
    return {
      status: Number(row.status),
      contentType: row.content_type ?? 'text/plain; charset=utf-8',
      headers: row.headers ? (JSON.parse(row.headers) as [string, string][]) : [],
      body: Buffer.from(body, 'base64'),
    }
  }
}
