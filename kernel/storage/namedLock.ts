import { sql, type Kysely } from 'kysely'
import type { Dialect } from './database.ts'

/**
 * MySQL/MariaDB: runs `work` while this process holds the named lock `lock` (GET_LOCK,
 * waiting up to 120 s), so processes starting together take turns. The lock belongs to
 * one connection of its own, which `work` gets (for work that must run on it, as DDL
 * does); work on the pool is kept apart just as well.
 */
export async function withNamedLock<T>(db: Kysely<any>, lock: string, busy: string, work: (connection: Kysely<any>) => Promise<T>): Promise<T> {
  return db.connection().execute(async (connection) => {
    const { rows } = await sql<{ got: number | null }>`select get_lock(${lock}, 120) as got`.execute(connection)
    if (Number(rows[0]?.got) !== 1) throw new Error(`${busy} for 120 s`)
    try {
      return await work(connection)
    } finally {
      await sql`select release_lock(${lock})`.execute(connection).catch(() => undefined)
    }
  })
}

/**
 * Runs the first-start work (the day secret, default groups, the root key) of one
 * process at a time. Processes started together on an empty MySQL/MariaDB database
 * (D16) would otherwise both create the same group, and one would stop on the unique
 * key. The work itself uses the pool and finds what the other process made. SQLite's
 * processes share one host and start one after another (the cluster primary prepares
 * the database first).
 */
export async function oneStartAtATime<T>(db: Kysely<any>, dialect: Dialect, work: () => Promise<T>): Promise<T> {
  if (dialect !== 'mysql') return work()
  return withNamedLock(db, 'keygate:first-start', 'first start: another process held the start lock', () => work())
}
