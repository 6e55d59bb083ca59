import type { MysqlPool, MysqlPoolConnection } from 'kysely'
import type { Pool, PoolConnection } from 'mysql2'
import { ConnectionWrites } from './uncertainWrites.ts'

/** database.queryTimeoutMs when the config has none: far above any normal statement. */
export const defaultQueryTimeoutMs = 10_000

/**
 * What a statement or a wait past the limit fails with: mysql2's own code for a query
 * over its timeout, which isStoreOutage counts as an outage (D6: 503 with Retry-After).
 */
export const overrunCode = 'PROTOCOL_SEQUENCE_TIMEOUT'

function overrun(what: string, limitMs: number): Error {
  return Object.assign(new Error(`${what} took more than ${limitMs} ms: the database does not answer`), { code: overrunCode })
}

/**
 * Ends a connection whose server stopped answering: its socket is destroyed with
 * `error`, so mysql2 fails the pending command (and any queued behind it) with that
 * error at once and drops the connection from its pool, which makes a new one for the
 * next caller. Its own destroy() would only half-close the socket (FIN) and leave the
 * pending command unanswered until the server speaks again.
 */
function cutOff(connection: PoolConnection, error: Error): void {
  ;(connection as unknown as { stream: { destroy(error: Error): void } }).stream.destroy(error)
}

export interface TimeLimitedPool {
  /** The pool as Kysely's MysqlDialect takes it. */
  readonly pool: MysqlPool
  /** From now on every statement, and every wait for a connection, ends within `limitMs`. */
  limit(limitMs: number): void
}

/**
 * A time limit on the service pool's work (finding: a database that stops answering
 * without closing its connections, paused or behind a firewall drop, held calls for
 * minutes). A connection whose statement has had no answer for the limit is cut off
 * (cutOff) and the statement fails as an outage; so does a wait for a connection that
 * passes the limit (every one stuck, or a new one whose server never greets). Off until
 * `limit` is called: the start's migrations and start lock (GET_LOCK, up to 120 s) may
 * rightly take longer.
 *
 * Statements are not timed one by one: a timer each would cost about 1 µs per query on
 * every call. Each connection notes when it last sent or heard back, and one sweep every
 * quarter of the limit cuts off those waiting longer, so a statement fails between 1 and
 * 1.25 times the limit.
 */
export function timeLimitedPool(pool: Pool): TimeLimitedPool {
  let limitMs = 0
  let sweeper: NodeJS.Timeout | null = null
  const watched = new Map<PoolConnection, Activity>()
  // Set by the pool's 'acquire' event while getConnection runs: it is emitted at once
  // only for a free connection, which needs no timer (the usual case, every call).
  let handedAtOnce = false
  pool.on('acquire', () => {
    handedAtOnce = true
  })
  // Each connection's query is wrapped once, when the pool makes it; it is forgotten when the pool drops it.
  pool.on('connection', (connection) => {
    const activity: Activity = { pending: 0, since: 0 }
    watched.set(connection, activity)
    const forget = () => watched.delete(connection)
    connection.once('end', forget)
    connection.once('error', forget)
    limitStatements(connection, activity, () => limitMs)
  })
  const sweep = () => {
    const now = Date.now()
    for (const [connection, activity] of watched) {
      if (activity.pending > 0 && now - activity.since > limitMs) {
        watched.delete(connection)
        cutOff(connection, overrun('a statement', limitMs))
      }
    }
  }
  const getConnection: MysqlPool['getConnection'] = (callback) => {
    if (limitMs === 0) return pool.getConnection(callback as never)
    const ms = limitMs
    let settled = false
    let late = false
    let timer: NodeJS.Timeout | undefined
    handedAtOnce = false
    pool.getConnection((error, connection) => {
      settled = true
      // Given up on already: the connection goes back for the next caller.
      if (late) return connection?.release()
      if (timer) clearTimeout(timer)
      callback(error, connection as unknown as MysqlPoolConnection)
    })
    if (handedAtOnce || settled) return
    timer = setTimeout(() => {
      late = true
      callback(overrun('the wait for a free connection', ms), undefined as never)
    }, ms)
  }
  return {
    pool: {
      getConnection,
      end(callback) {
        if (sweeper) clearInterval(sweeper)
        pool.end(callback)
      },
    },
    limit(ms) {
      limitMs = ms
      if (sweeper) clearInterval(sweeper)
      sweeper = setInterval(sweep, Math.max(10, Math.floor(ms / 4)))
      sweeper.unref()
    },
  }
}

/** A connection's statements: how many are out, and when it last sent one or heard back. */
interface Activity {
  pending: number
  since: number
}

type QueryCallback = (error: unknown, result?: unknown, fields?: unknown) => void

/** A failure of the connection itself (cut off here, or lost), not an error the server answered. */
function connectionLost(error: unknown): boolean {
  return (error as { fatal?: boolean } | null)?.fatal === true || (error as { code?: string } | null)?.code === overrunCode
}

/**
 * Kysely runs everything through query(sql, parameters, callback); a streamed query (no
 * callback) is left alone. A failure that may have left a write behind is marked (uncertainWrites.ts).
 */
function limitStatements(connection: PoolConnection, activity: Activity, limitMs: () => number): void {
  const query = connection.query as unknown as (this: PoolConnection, sql: unknown, values: unknown, callback?: QueryCallback) => unknown
  const writes = new ConnectionWrites()
  ;(connection as unknown as { query: typeof query }).query = function (sql, values, callback) {
    if (typeof callback !== 'function') return query.call(this, sql, values, callback)
    const mayWrite = writes.sending(sql)
    if (limitMs() === 0) return query.call(this, sql, values, callback)
    if (activity.pending++ === 0) activity.since = Date.now()
    return query.call(this, sql, values, (error, result, fields) => {
      activity.pending--
      activity.since = Date.now()
      if (error) writes.failed(error, mayWrite, connectionLost(error))
      callback(error, result, fields)
    })
  }
}
