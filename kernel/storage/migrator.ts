import { Migrator, type Kysely, type MigrationProvider } from 'kysely'
import type { Migrations } from '../plugin.ts'
import type { Dialect } from './database.ts'

/**
 * Applies one owner's migrations (the kernel's, or one plugin's) with their own
 * bookkeeping table, so plugins version independently and can be enabled later.
 */
export async function migrate(db: Kysely<any>, dialect: Dialect, owner: string, migrations: Migrations): Promise<void> {
  const provider: MigrationProvider = {
    getMigrations: async () =>
      Object.fromEntries(Object.entries(migrations).map(([name, migration]) => [name, { up: (handle: Kysely<any>) => migration.up(handle, dialect) }])),
  }
  const migrator = new Migrator({
    db,
    provider,
    migrationTableName: `migrations_${owner.replace(/[^a-z0-9]/gi, '_')}`,
    migrationLockTableName: `migrations_${owner.replace(/[^a-z0-9]/gi, '_')}_lock`,
  })
  const { error, results } = await migrator.migrateToLatest()
  if (error) {
    const failed = results?.find((result) => result.status === 'Error')
    throw new Error(`migration ${owner}/${failed?.migrationName ?? '?'} failed: ${(error as Error).message ?? error}`)
  }
}
