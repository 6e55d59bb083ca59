import { chmodSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { Kysely, MysqlDialect, sql, type CreateTableBuilder, type Insertable } from 'kysely'
import SQLite from 'better-sqlite3'
import { LRUCache } from 'lru-cache'
import type { PoolOptions } from 'mysql2'
import type { CoreTables } from './coreTables.ts'
import { sqliteWriterThread } from './sqliteWriterThread.ts'
import { WaitingSqliteDialect } from './sqliteDriver.ts'
import { sqliteLiteralLimit } from './sqliteLiteralLimit.ts'
import { mysqlWriterThread } from './mysqlWriterThread.ts'
import { defaultQueryTimeoutMs, timeLimitedPool } from './mysqlTimeLimit.ts'
import type { WriterThread } from './writerThread.ts'
import { makeFolder } from './makeFolder.ts'

export type Dialect = 'sqlite' | 'mysql'

/** A row for insertMany: a text column may also be given as its UTF-8 bytes. */
export type RowWithTextBytes<Row> = { [Column in keyof Row]: Row[Column] | (string extends Row[Column] ? Uint8Array : never) }

/**
 * A text kept once by its digest beside an insertMany batch (the call log's shared
 * answers, api_log_body): inserted when new, its keep_until only ever raised.
 */
export interface SharedText {
  digest: string
  body: string | Uint8Array
  keep_until: number
}

/** One database for the kernel and its plugins: a typed Kysely handle over SQLite or MySQL. */
export interface Database {
  readonly dialect: Dialect
  /** Typed over the kernel's tables; plugins widen it with `db.withTables<TheirTables>()`. */
  readonly db: Kysely<CoreTables>
  /**
   * Inserts many rows of one kernel table at once, in one transaction (whole or not at
   * all), written by a thread with a connection of its own (writerThread.ts): the
   * request thread only hands over the values. All rows must have the same columns; a
   * text column may be given as bytes (a Uint8Array), written as their UTF-8 text.
   * For hot paths (the call log). `shared` texts (digest, body, keep_until) are upserted
   * into their table in the same transaction.
   */
  insertMany<Table extends keyof CoreTables & string>(
    table: Table,
    rows: readonly RowWithTextBytes<Insertable<CoreTables[Table]>>[],
    shared?: { table: 'api_log_body'; texts: readonly SharedText[] },
  ): Promise<void>
  /**
   * Puts `queryTimeoutMs` (openDatabase) on the request pool's work from now on: on
   * MySQL each statement and each wait for a connection then ends within it or fails as
   * an outage (D6: 503). Called once the start's work is done (migrations, start locks
   * may rightly take longer). insertMany's writer thread has it from the first batch.
   * SQLite needs none: its waits for a locked file end after sqliteBusyWaitMs.
   */
  limitQueryTime(): void
  close(): Promise<void>
}

/** Where a database is and, for MySQL, its time limit (config `database.queryTimeoutMs`). */
export interface DatabaseOptions {
  databaseUrl: string | null
  dataDir: string
  database?: { queryTimeoutMs: number }
}

/** SQLite's page size for a new database file, and the request thread's page cache (below). */
const sqlitePageBytes = 8192
const sqliteCacheKib = 16 * 1024

/**
 * How long a request-thread statement waits for a SQLite file locked by another
 * connection before it fails as an outage (D6: 503). It waits off the event loop
 * (sqliteDriver.ts); the writer thread waits as long in SQLite (busy_timeout).
 */
const sqliteBusyWaitMs = 5000

/**
 * `checkpointInBackground` (the service's own database, not the CLI's): SQLite's WAL
 * checkpoints run in the writer thread instead of inside the service's commits.
 */
export function openDatabase(options: DatabaseOptions, { checkpointInBackground = false } = {}): Database {
  if (options.databaseUrl) return openMysql(options.databaseUrl, options.database?.queryTimeoutMs ?? defaultQueryTimeoutMs)
  makeFolder(options.dataDir)
  const path = join(options.dataDir, 'keygate.sqlite')
  const file = new SQLite(path)
  // The database holds sealed secrets and people's data: owner only (WAL files follow it).
  chmodSync(path, 0o600)
  // A new file gets 8 KiB pages (an existing one keeps its size: SQLite ignores this once
  // the file has tables). With its 22 indexes a person is 23 B-tree inserts; 8 KiB pages
  // make shallower trees and fewer page splits: the database alone wrote 100,000 people
  // in 2.4-2.7 s against 3.3-3.9 s with 4 KiB (a 32 MiB cache on both; see below).
  file.pragma(`page_size = ${sqlitePageBytes}`)
  file.pragma('journal_mode = WAL')
  file.pragma('synchronous = NORMAL')
  // The request thread's page cache, in KiB (negative): SQLite's default 2 MB is less
  // than the dirty index pages of one import batch (10,000 people, the most importmass
  // takes), so a batch spilled and re-read pages mid-transaction: 100,000 people took
  // 4.1-6.4 s, against 2.3-2.6 s in most runs with 16 MiB (32 MiB gained nothing more).
  // Memory is taken as pages are read, up to this bound per process (benchmarks.md).
  file.pragma(`cache_size = -${sqliteCacheKib}`)
  // No wait inside SQLite from here on: it would stop the event loop (every call, /healthz)
  // for as long as another program holds the file's write lock. WaitingSqliteDialect
  // waits on a timer instead. (The pragmas above waited at start, SQLite's default.)
  file.pragma('busy_timeout = 0')
  file.pragma('foreign_keys = ON')
  const writer = sqliteWriterThread(file, path, { checkpointEveryMs: checkpointInBackground ? 200 : null })
  const listValues = valueListers(crossing)
  // Kysely prepares every query it runs; each prepared statement holds native memory
  // that only a garbage collection gives back. Keeping them by SQL text prepares each
  // query shape once and keeps that memory bounded. (Kysely runs one statement at a
  // time per connection and we use no streaming, so a statement is never shared mid-use.)
  const statements = new LRUCache<string, SQLite.Statement>({ max: 1000 })
  // SQLite rolls a transaction back by itself on some errors (SQLITE_FULL, SQLITE_IOERR);
  // Kysely's rollback then fails with "no transaction is active" and hides the real
  // error (a 503 becomes a 500). With nothing left to roll back, it does nothing.
  const nothingToRollBack = { reader: false, run: () => ({ changes: 0, lastInsertRowid: 0 }) } as unknown as SQLite.Statement
  const database = {
    prepare(text: string) {
      if (text === 'rollback' && !file.inTransaction) return nothingToRollBack
      // Kysely begins deferred: a transaction that reads, then writes, fails at once with
      // SQLITE_BUSY_SNAPSHOT (a 503) when another connection (WORKERS > 1 on one file)
      // committed in between. Immediate takes the write lock at the start (waiting for it
      // as WaitingSqliteDialect does), so such a transaction waits its turn instead of failing.
      if (text === 'begin') text = 'begin immediate'
      let statement = statements.get(text)
      if (statement === undefined) {
        statement = withRowsFromArrays(file.prepare(text))
        statements.set(text, statement)
      }
      return statement
    },
    get inTransaction() {
      return file.inTransaction
    },
    close: () => file.close(),
  }
  const db = new Kysely<CoreTables>({ dialect: new WaitingSqliteDialect(database, sqliteBusyWaitMs), plugins: [sqliteLiteralLimit] })
  return {
    dialect: 'sqlite',
    db,
    insertMany: (table, rows, shared) => handOver(writer, listValues, table, rows, shared),
    limitQueryTime: () => undefined,
    async close() {
      await writer.stop()
      await db.destroy()
    },
  }
}

/**
 * insertMany's rows as the writer thread takes them: one flat array of values, cheaper
 * to copy across than row objects. Bytes cross as they are, unless they are a view into
 * a larger buffer (Node's shared pool): a copy would take the whole buffer, so those
 * become text here.
 */
async function handOver(writer: WriterThread, listValues: ValueListers, table: string, rows: readonly object[], shared?: { table: string; texts: readonly SharedText[] }): Promise<void> {
  if (rows.length === 0) return
  const columns = Object.keys(rows[0])
  const values = listValues(columns)(rows)
  let texts: { table: string; values: unknown[] } | undefined
  if (shared && shared.texts.length > 0) {
    texts = { table: shared.table, values: [] }
    for (const text of shared.texts) texts.values.push(text.digest, crossing(text.body), text.keep_until)
  }
  await writer.insert(table, columns, values, texts)
}

/** A value as it is handed to the writer thread (handOver). */
function crossing(value: unknown): unknown {
  return value instanceof Uint8Array && value.byteLength !== value.buffer.byteLength
    ? Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8')
    : value
}

export type ValueLister = (rows: readonly object[]) => unknown[]
export type ValueListers = (columns: readonly string[]) => ValueLister

/**
 * The inverse of rowBuilder: the rows' values in column order as one flat list (absent
 * = NULL, each passed through `each` when given), by a function compiled for the column
 * list. Its reads by constant names stay fast where a read by a changing name goes
 * through V8's generic lookup (a row of 23 columns: 87-125 ns against 391). Filled by
 * push, so the array is packed: V8 copies a holey one (`new Array(n)`) to a thread value
 * by value, about 3.5 times the cost. Names are quoted with JSON.stringify; an own
 * `__proto__` property is read as itself.
 */
export function valueLister(columns: readonly string[], each?: (value: unknown) => unknown): ValueLister {
  const reads = columns.map((column) => (each ? `each(row[${JSON.stringify(column)}] ?? null)` : `row[${JSON.stringify(column)}] ?? null`)).join(', ')
  return new Function('each', `return (rows) => {
    const values = []
    for (let index = 0; index < rows.length; index++) { const row = rows[index]; values.push(${reads}) }
    return values
  }`)(each) as ValueLister
}

/**
 * valueLister per column list, each compiled once; at most `max` kept, as a list may
 * depend on input (an import's upsert names the fields its rows gave).
 */
export function valueListers(each?: (value: unknown) => unknown, max = 64): ValueListers {
  const listers = new Map<string, ValueLister>()
  return (columns) => {
    // JSON keeps ['a,b'] and ['a', 'b'] apart, as a joined text would not.
    const key = JSON.stringify(columns)
    let lister = listers.get(key)
    if (lister === undefined) {
      if (listers.size >= max) listers.clear()
      lister = valueLister(columns, each)
      listers.set(key, lister)
    }
    return lister
  }
}

/**
 * Makes a statement's row arrays into row objects with one object literal, compiled
 * once per statement. Adding the properties one by one to `{}` (the loop this replaced)
 * turns an object of more than a dozen columns into a slow dictionary: a page of 100
 * people (25 columns) took 120 µs to build that way and 4 µs this way, and its rows
 * were slower to read afterwards. Names are quoted with JSON.stringify, so any column
 * name is a plain key; `__proto__` would set the prototype in a literal, so a
 * statement naming it defines each property instead.
 */
export function rowBuilder(names: readonly string[]): (values: unknown[]) => Record<string, unknown> {
  if (names.includes('__proto__')) {
    return (values) => {
      const object: Record<string, unknown> = {}
      for (let index = 0; index < names.length; index++) Object.defineProperty(object, names[index], { value: values[index], enumerable: true, writable: true, configurable: true })
      return object
    }
  }
  return new Function('values', `return { ${names.map((name, index) => `${JSON.stringify(name)}: values[${index}]`).join(', ')} }`) as (values: unknown[]) => Record<string, unknown>
}

/**
 * A reading statement answers arrays (better-sqlite3's raw mode) made into row objects
 * by `rowBuilder`: a fraction of the CPU of better-sqlite3's own row objects, which
 * shows on every page of 100 people.
 */
function withRowsFromArrays(statement: SQLite.Statement): SQLite.Statement {
  if (!statement.reader) return statement
  const row = rowBuilder(statement.raw(true).columns().map((column) => column.name))
  // Only what Kysely's SQLite driver calls (reader, all, iterate) and get.
  return {
    reader: true,
    all: (...parameters: unknown[]) => (statement.all(...parameters) as unknown[][]).map(row),
    get: (...parameters: unknown[]) => {
      const values = statement.get(...parameters) as unknown[] | undefined
      return values === undefined ? undefined : row(values)
    },
    *iterate(...parameters: unknown[]) {
      for (const values of statement.iterate(...parameters)) yield row(values as unknown[])
    },
  } as unknown as SQLite.Statement
}

/** The pool's options from a mysql:// URL: the service's pool and the writer thread's. */
export function mysqlPoolOptions(url: string): PoolOptions {
  const parsed = new URL(url)
  return {
    host: parsed.hostname,
    port: Number(parsed.port || 3306),
    user: decodeURIComponent(parsed.username),
    password: decodeURIComponent(parsed.password),
    database: decodeURIComponent(parsed.pathname.slice(1)),
    connectionLimit: Number(parsed.searchParams.get('connectionLimit') ?? 10),
    charset: 'utf8mb4_bin',
    timezone: 'Z',
    connectTimeout: 5000,
    // Large ids are < 2^53 by construction (D8), so numbers are safe.
    supportBigNumbers: true,
    bigNumberStrings: false,
    enableKeepAlive: true,
  }
}

function openMysql(url: string, queryTimeoutMs: number): Database {
  const options = mysqlPoolOptions(url)
  // Loaded only here: a service on SQLite does not carry the MySQL driver's code (about 10 MB of RSS).
  const { createPool } = createRequire(import.meta.url)('mysql2') as typeof import('mysql2')
  const pool = timeLimitedPool(createPool(options))
  const db = new Kysely<CoreTables>({ dialect: new MysqlDialect({ pool: pool.pool }) })
  const writer = mysqlWriterThread(options, queryTimeoutMs)
  const listValues = valueListers(crossing)
  return {
    dialect: 'mysql',
    db,
    insertMany: (table, rows, shared) => handOver(writer, listValues, table, rows, shared),
    limitQueryTime: () => pool.limit(queryTimeoutMs),
    async close() {
      await writer.stop()
      await db.destroy()
    },
  }
}

/**
 * Table options that make MySQL behave like SQLite where it matters to us: utf8mb4
 * for any Unicode, and a binary collation so uniqueness and lookups are exact.
 */
export function portableTable<T extends string, C extends string>(
  dialect: Dialect,
  builder: CreateTableBuilder<T, C>,
): CreateTableBuilder<T, C> {
  return dialect === 'mysql'
    ? builder.modifyEnd(sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin`)
    : builder
}

const uniqueViolationCodes = new Set(['ER_DUP_ENTRY', 'SQLITE_CONSTRAINT_UNIQUE', 'SQLITE_CONSTRAINT_PRIMARYKEY'])

export function isUniqueViolation(error: unknown): boolean {
  return uniqueViolationCodes.has((error as { code?: string })?.code ?? '')
}

const outageCodes = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH',
  'PROTOCOL_CONNECTION_LOST', 'PROTOCOL_SEQUENCE_TIMEOUT', 'ER_CON_COUNT_ERROR', 'ER_SERVER_SHUTDOWN',
  'ER_LOCK_WAIT_TIMEOUT', 'ER_LOCK_DEADLOCK', 'ER_OPTION_PREVENTS_STATEMENT', 'ER_RECORD_FILE_FULL',
  'SQLITE_BUSY', 'SQLITE_LOCKED', 'SQLITE_FULL', 'SQLITE_IOERR', 'SQLITE_CANTOPEN', 'SQLITE_READONLY',
  'ENOSPC', 'EROFS',
])

/** True for errors that mean "the store is not reachable or usable right now" (D6: 503). */
export function isStoreOutage(error: unknown): boolean {
  const code = (error as { code?: string })?.code ?? ''
  if (outageCodes.has(code)) return true
  if (code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_BUSY')) return true
  const message = (error as Error)?.message ?? ''
  return /Pool is closed|connect ECONNREFUSED|Connection lost|Can't add new command when connection is in closed state|closed state/.test(message)
}

/**
 * Runs `work` (one transaction, rolled back whole when it throws) again, up to `attempts`
 * times in all, while it fails in a way `retryable` says a rerun may get past. With
 * `pauseMs`, each rerun first waits a random time up to `pauseMs` times the attempts made,
 * so writers that collided do not collide again in step.
 */
export async function retryWhen<T>(work: () => Promise<T>, retryable: (error: unknown) => boolean, attempts = 3, pauseMs = 0): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work()
    } catch (error) {
      if (attempt >= attempts || !retryable(error)) throw error
      if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, Math.random() * pauseMs * attempt))
    }
  }
}

const isDeadlock = (error: unknown) => (error as { code?: string })?.code === 'ER_LOCK_DEADLOCK'

/**
 * Runs `work` (one transaction) again when MySQL picks it as a deadlock victim, as it
 * may when several writes race on one unique index entry. That is neither the client's
 * fault nor an outage; the rerun meets the committed row and answers as usual.
 */
export function retryOnDeadlock<T>(work: () => Promise<T>, attempts = 6): Promise<T> {
  // Several batches racing on the same new rows could lose three times in a row on a busy
  // host (an import answered 503); a short random pause between reruns breaks the step.
  return retryWhen(work, isDeadlock, attempts, 10)
}
