import type { Kysely } from 'kysely'
import type { SecretBox } from '../auth/secrets.ts'
import type { CoreTables } from '../storage/coreTables.ts'
import { isUniqueViolation } from '../storage/database.ts'
import type { Answer } from './exchange.ts'

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

export type Claim =
  | { kind: 'claimed' }
  | { kind: 'stored'; answer: Answer }
  | { kind: 'running' }
  | { kind: 'mismatch' }

/**
 * Answers of writes sent with an Idempotency-Key, per key, in the database, so every
 * process serving the key sees them and a restart loses none. A claim is a row written
 * before the work starts (the primary key makes two racing claims one); the answer is
 * stored after it. A claim whose process died is taken over once `abandonedAfterMs`
 * has passed. Stored bodies are sealed under the master key (idempotencyContext).
 */
export class IdempotencyStore {
  private purgeTimer: NodeJS.Timeout | null = null

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly secrets: Pick<SecretBox, 'seal' | 'open'>,
    private readonly clock: () => number,
    private readonly abandonedAfterMs: number,
  ) {}

  async claim(keyId: number, idemKey: string, requestHash: string): Promise<Claim> {
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
        return { kind: 'claimed' }
      } catch (error) {
        if (!isUniqueViolation(error)) throw error
        // Another call claimed it first: look again.
      }
    }
    return { kind: 'running' }
  }

  async complete(keyId: number, idemKey: string, answer: Answer): Promise<void> {
    await this.db.updateTable('api_idempotency')
      .set({ status: answer.status, content_type: answer.contentType, headers: JSON.stringify(answer.headers), body: this.secrets.seal(answer.body.toString('base64'), idempotencyContext(keyId, idemKey)) })
      .where('key_id', '=', keyId).where('idem_key', '=', idemKey).execute()
  }

  /** The call was refused (4xx) or failed on our side (5xx): the key may be retried as new. */
  async release(keyId: number, idemKey: string): Promise<void> {
    await this.db.deleteFrom('api_idempotency').where('key_id', '=', keyId).where('idem_key', '=', idemKey).where('status', '=', 0).execute()
  }

  startPurging(everyMs: number, report: (error: unknown) => void): void {
    this.purgeTimer = setInterval(() => {
      this.db.deleteFrom('api_idempotency').where('created_at', '<', this.clock() - idempotencyTtlMs).execute().catch(report)
    }, everyMs)
    this.purgeTimer.unref()
  }

  stop(): void {
    if (this.purgeTimer) clearInterval(this.purgeTimer)
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
