import { LRUCache } from 'lru-cache'
import type { AuthRecord, SignedWith } from './keyDirectory.ts'

/** A signature a key proved, with exactly what it covered. */
export interface ProvenSignature {
  toSign: string
  signature: string
  method: number
  signedWith: SignedWith
}

/** Keys whose last proven signature is remembered (the busiest ones stay). */
export const signatureMemoryMax = 10_000

/**
 * The last signature each recently busy key proved. A client may reuse a signature
 * within its second, and the same input needs no second HMAC. Kept apart from the
 * loaded keys (issue 19 goal 4): on the key's record it cost about 260 bytes for every
 * one of `cache.maxEntries` loaded keys, most of them called once; here only the
 * busiest keys hold one. Keyed by the loaded record itself, so a key reloaded after a
 * rotation or edit starts with nothing remembered.
 */
export class SignatureMemory {
  private readonly proven: LRUCache<AuthRecord, ProvenSignature>

  constructor(maxKeys = signatureMemoryMax) {
    this.proven = new LRUCache({ max: maxKeys })
  }

  /** Keys with a remembered signature now (bounded by maxKeys). */
  get size(): number {
    return this.proven.size
  }

  last(record: AuthRecord): ProvenSignature | undefined {
    return this.proven.get(record)
  }

  remember(record: AuthRecord, proven: ProvenSignature): void {
    this.proven.set(record, proven)
  }
}
