import { sql, type Kysely } from 'kysely'
import type { Migrations } from '../plugin.ts'
import type { Dialect } from './database.ts'
import { withNamedLock } from './namedLock.ts'

/**
 * Applies one owner's migrations (the kernel's, or one plugin's) in name order, once
 * each, with a bookkeeping table of its own (`migrations_<owner>`: name, timestamp, the
 * table Kysely's Migrator kept, so existing installations carry on), so plugins version
 * independently and can be enabled later.
 *
 * Kysely's Migrator asks information_schema whether its tables exist on every start;
 * on MariaDB that query is slow with many databases and once took the server down under
 * heavy parallel load. Here the tables are made with `create table if not exists`, and
 * processes starting together take turns: a named lock on MySQL (GET_LOCK), the
 * database's own write lock on SQLite (one migration per immediate transaction).
 */
export async function migrate(db: Kysely<any>, dialect: Dialect, owner: string, migrations: Migrations): Promise<void> {
  const table = `migrations_${owner.replace(/[^a-z0-9]/gi, '_')}`
  const names = Object.keys(migrations).sort()
  await sql`create table if not exists ${sql.table(table)} (name varchar(255) not null primary key, timestamp varchar(255) not null)`.execute(db)
  const applied = async (executor: Kysely<any>) =>
    new Set((await executor.selectFrom(table).select('name').execute()).map((row: { name: string }) => row.name))
  // The usual start: everything is applied already, and nobody needs to take turns.
  const done = await applied(db)
  const unknown = [...done].filter((name) => !(name in migrations)).sort()
  if (unknown.length > 0) throw new NewerDatabase(owner, unknown)
  if (names.every((name) => done.has(name))) return
  if (dialect === 'mysql') return migrateLocked(db, table, owner, migrations, names, applied)
  for (const name of names) {
    // BEGIN IMMEDIATE takes SQLite's write lock: a second process waits for it (WaitingSqliteDialect), then sees the row.
    await db.connection().execute(async (connection) => {
      await sql`begin immediate`.execute(connection)
      try {
        if (!(await applied(connection)).has(name)) {
          await run(connection, 'sqlite', owner, name, migrations)
          await connection.insertInto(table).values({ name, timestamp: new Date().toISOString() }).execute()
        }
        await sql`commit`.execute(connection)
      } catch (error) {
        await sql`rollback`.execute(connection).catch(() => undefined)
        throw error
      }
    })
  }
}

/**
 * The database holds migrations this version does not have: a newer version migrated it
 * (a downgrade). Starting would run old code on tables it does not know (migrations are
 * only ever appended, so an unknown name can only come from a later release).
 */
export class NewerDatabase extends Error {
  constructor(owner: string, unknown: string[]) {
    super(
      `this database was migrated by a newer version of keygate (${owner} migration ${unknown.join(', ')} is unknown to this one): ` +
        'start that version again, or restore the backup taken before the upgrade',
    )
  }
}

/** MySQL/MariaDB: DDL commits by itself, so a named lock, not a transaction, keeps two starting processes apart. */
async function migrateLocked(db: Kysely<any>, table: string, owner: string, migrations: Migrations, names: string[], applied: (executor: Kysely<any>) => Promise<Set<string>>): Promise<void> {
  await withNamedLock(db, `keygate:${table}`, `migration ${owner}: another process held the migration lock`, async (connection) => {
    const done = await applied(connection)
    for (const name of names) {
      if (done.has(name)) continue
      await run(connection, 'mysql', owner, name, migrations)
      await connection.insertInto(table).values({ name, timestamp: new Date().toISOString() }).execute()
    }
  })
}

async function run(db: Kysely<any>, dialect: Dialect, owner: string, name: string, migrations: Migrations): Promise<void> {
  try {
    await migrations[name].up(db, dialect)
  } catch (error) {
    throw new Error(`migration ${owner}/${name} failed: ${(error as Error).message ?? error}`)
  }
}
