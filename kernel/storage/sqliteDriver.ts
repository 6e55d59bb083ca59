import { CompiledQuery, SqliteDialect, type DatabaseConnection, type Driver, type QueryResult, type SqliteDatabase } from 'kysely'

/** The request thread's SQLite connection as the driver needs it: Kysely's, and whether a transaction is open. */
export interface WaitingSqliteDatabase extends SqliteDatabase {
  readonly inTransaction: boolean
}

/**
 * Kysely's SQLite dialect whose driver waits for a locked file off the event loop.
 * better-sqlite3 is synchronous: with SQLite's own wait (busy_timeout) another program's
 * write transaction (an operator's `sqlite3` shell, a backup tool) stopped the whole
 * process for as long as it lasted, `/healthz` and cached answers included. So the
 * connection is given no busy_timeout, and a statement refused with SQLITE_BUSY is run
 * again after a short timer, until `busyWaitMs` have passed; then its error stands (D6: 503).
 */
export class WaitingSqliteDialect extends SqliteDialect {
  readonly #database: WaitingSqliteDatabase
  readonly #busyWaitMs: number

  constructor(database: WaitingSqliteDatabase, busyWaitMs: number) {
    super({ database })
    this.#database = database
    this.#busyWaitMs = busyWaitMs
  }

  override createDriver(): Driver {
    return new WaitingSqliteDriver(this.#database, this.#busyWaitMs)
  }
}

/** SQLite's own busy handler's steps (ms), capped: a refused attempt costs microseconds. */
const retryDelaysMs = [1, 2, 5, 10, 15, 20, 25]

function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY')
}

/**
 * Kysely's SqliteDriver (one connection, one user at a time), with one difference: while
 * a statement waits for the lock, it hands the connection back, so other calls' reads
 * and writes run meanwhile. Only a statement run outside a transaction waits: refused,
 * it did nothing (a single statement, or a transaction's BEGIN IMMEDIATE, which Kysely's
 * `begin` becomes in database.ts), so running it again is safe, and no transaction of
 * ours is open for another user to step into. A statement inside a transaction is not
 * refused for the lock in WAL mode (its BEGIN IMMEDIATE holds it); if it is, it fails.
 */
class WaitingSqliteDriver implements Driver {
  readonly #database: WaitingSqliteDatabase
  readonly #mutex = new ConnectionMutex()
  readonly #connection: WaitingSqliteConnection

  constructor(database: WaitingSqliteDatabase, busyWaitMs: number) {
    this.#database = database
    this.#connection = new WaitingSqliteConnection(database, this.#mutex, busyWaitMs)
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.#mutex.lock()
    return this.#connection
  }

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin'))
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'))
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'))
  }

  async releaseConnection(): Promise<void> {
    this.#mutex.unlock()
  }

  async destroy(): Promise<void> {
    this.#database.close()
  }
}

class WaitingSqliteConnection implements DatabaseConnection {
  readonly #database: WaitingSqliteDatabase
  readonly #mutex: ConnectionMutex
  readonly #busyWaitMs: number

  constructor(database: WaitingSqliteDatabase, mutex: ConnectionMutex, busyWaitMs: number) {
    this.#database = database
    this.#mutex = mutex
    this.#busyWaitMs = busyWaitMs
  }

  executeQuery<Row>(query: CompiledQuery): Promise<QueryResult<Row>> {
    // Read before the attempt: a refused statement may leave no transaction where there was one.
    const inTransaction = this.#database.inTransaction
    try {
      return Promise.resolve(this.#run<Row>(query))
    } catch (error) {
      if (inTransaction || !isBusy(error)) return Promise.reject(error)
      return this.#runWhenFree<Row>(query, error)
    }
  }

  /** Called and returns holding the connection (the mutex); lets go of it only while waiting. */
  async #runWhenFree<Row>(query: CompiledQuery, error: unknown): Promise<QueryResult<Row>> {
    const until = Date.now() + this.#busyWaitMs
    for (let attempt = 0; Date.now() < until; attempt++) {
      this.#mutex.unlock()
      await new Promise((resolve) => setTimeout(resolve, Math.min(retryDelaysMs[Math.min(attempt, retryDelaysMs.length - 1)], until - Date.now())))
      await this.#mutex.lock()
      try {
        return this.#run<Row>(query)
      } catch (again) {
        // No transaction can be open here (whoever held the connection meanwhile ended theirs).
        if (!isBusy(again)) throw again
        error = again
      }
    }
    throw error
  }

  #run<Row>({ sql, parameters }: CompiledQuery): QueryResult<Row> {
    const statement = this.#database.prepare(sql)
    if (statement.reader) return { rows: statement.all(parameters) as Row[] }
    const { changes, lastInsertRowid } = statement.run(parameters)
    return {
      numAffectedRows: changes !== undefined && changes !== null ? BigInt(changes) : undefined,
      insertId: lastInsertRowid !== undefined && lastInsertRowid !== null ? BigInt(lastInsertRowid) : undefined,
      rows: [],
    }
  }

  async *streamQuery<Row>({ sql, parameters }: CompiledQuery): AsyncIterableIterator<QueryResult<Row>> {
    for (const row of this.#database.prepare(sql).iterate(parameters)) yield { rows: [row as Row] }
  }
}

/** Kysely's: one user of the connection at a time. */
class ConnectionMutex {
  #promise: Promise<void> | undefined
  #resolve: (() => void) | undefined

  async lock(): Promise<void> {
    while (this.#promise) await this.#promise
    this.#promise = new Promise((resolve) => (this.#resolve = resolve))
  }

  unlock(): void {
    const resolve = this.#resolve
    this.#promise = undefined
    this.#resolve = undefined
    resolve?.()
  }
}
