import { sql, type Kysely } from 'kysely'
import type { Dialect } from './database.ts'

/**
 * Runs the first-start work (the day secret, default groups, the root key) of one
 * process at a time. Processes started together on an empty MySQL/MariaDB database
 * (D16) would otherwise both create the same group, and one would stop on the unique
 * key. A named lock (GET_LOCK) on a connection of its own; the work itself uses the
 * pool and finds what the other process made. SQLite's processes share one host and
 * start one after another (the cluster primary prepares the database first).
 */
export async function oneStartAtATime<T>(db: Kysely<any>, dialect: Dialect, work: () => Promise<T>): Promise<T> {
  if (dialect !== 'mysql') return work()
  return db.connection().execute(async (connection) => {
    const { rows } = await sql<{ got: number | null }>`select get_lock('keygate:first-start', 120) as got`.execute(connection)
    if (Number(rows[0]?.got) !== 1) throw new Error('first start: another process held the start lock for 120 s')
    try {
      return await work()
    } finally {
      await sql`select release_lock('keygate:first-start')`.execute(connection).catch(() => undefined)
    }
  })
}
