/**
 * Which failed MySQL statements may still have been carried out. A statement ends without
 * an answer when its connection is cut off (database.queryTimeoutMs) or lost; the server
 * may yet run what it had received. A statement inside a transaction is no such case: the
 * transaction never commits, since its connection is gone. A `COMMIT`, or a write outside
 * a transaction (autocommit), is: the change may be there when the database answers again,
 * though the call answered 503. Such an error is marked, so a retry under the same
 * Idempotency-Key is refused rather than run twice (http/stages/idempotency.ts).
 */

const mayHaveWritten = Symbol('keygate.mayHaveWritten')

/** True when the failed statement behind `error` may have changed the database all the same. */
export function writeMayHaveLanded(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { [mayHaveWritten]?: true })[mayHaveWritten] === true
}

// Only the statement's first word matters; Kysely writes them in lower case, raw SQL may not.
const leadingWord = /^\s*(begin|start|commit|rollback|insert|update|delete|replace)\b/i
const rollbackToSavepoint = /^\s*rollback\s+(work\s+)?to\b/i

/**
 * One connection's statements as they go out: whether a transaction is open, and whether
 * a statement that may have written has failed on it. After that every failure on the
 * connection is marked too: Kysely answers a failed `COMMIT` with a `ROLLBACK` on the same
 * dead connection and throws the rollback's error, not the commit's.
 */
export class ConnectionWrites {
  private inTransaction = false
  private uncertain = false

  /** Notes a statement being sent; answers whether it may write if it fails unanswered. */
  sending(sql: unknown): boolean {
    const word = typeof sql === 'string' ? leadingWord.exec(sql)?.[1].toLowerCase() : undefined
    if (word === undefined) return false
    if (word === 'begin' || word === 'start') {
      this.inTransaction = true
      return false
    }
    // `ROLLBACK TO SAVEPOINT` goes back within the transaction, which stays open.
    if (word === 'rollback' && rollbackToSavepoint.test(sql as string)) return false
    if (word === 'commit' || word === 'rollback') {
      const ended = this.inTransaction
      this.inTransaction = false
      return word === 'commit' && ended
    }
    return !this.inTransaction
  }

  /** Marks `error` when `writes` (what sending said) and the connection, not the statement, failed (`connectionLost`). */
  failed(error: unknown, writes: boolean, connectionLost: boolean): void {
    if (typeof error !== 'object' || error === null) return
    if (!this.uncertain && !(writes && connectionLost)) return
    this.uncertain = true
    Object.defineProperty(error, mayHaveWritten, { value: true })
  }
}
