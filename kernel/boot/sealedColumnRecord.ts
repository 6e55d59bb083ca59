import { createHash } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import type { Plugin, SealedColumn } from '../plugin.ts'
import { readSetting } from './bootstrap.ts'

/**
 * Which plugins keep sealed columns, remembered in kernel_settings when each starts: a
 * master-key rotation run without a plugin (disabled in its config) learns from here
 * that the database holds secrets it cannot re-seal, and refuses rather than lose them.
 */
export interface SealedColumnRecord {
  plugin: string
  columns: SealedColumn[]
}

const recordPrefix = 'sealed_columns_'

/** One setting per plugin (hashed: a plugin's name may be longer than a setting's). */
function recordName(plugin: string): string {
  return `${recordPrefix}${createHash('sha256').update(plugin).digest('hex').slice(0, 32)}`
}

/**
 * Records (or updates) each started plugin's sealed columns; a started plugin that no
 * longer declares any loses its record, since it says itself that it keeps no secret.
 * Runs inside the start lock (oneStartAtATime), so a read then a write does not race.
 */
export async function recordSealedColumns(db: Kysely<CoreTables>, plugins: readonly Plugin[]): Promise<void> {
  for (const plugin of plugins) {
    const name = recordName(plugin.name)
    const stored = await readSetting(db, name)
    const columns = plugin.sealedColumns ?? []
    if (columns.length === 0) {
      if (stored !== undefined) await db.deleteFrom('kernel_settings').where('name', '=', name).execute()
      continue
    }
    const record: SealedColumnRecord = {
      plugin: plugin.name,
      columns: columns.map(({ table, idColumn, column, contextPrefix }) => ({ table, idColumn, column, contextPrefix })),
    }
    const value = JSON.stringify(record)
    if (stored === value) continue
    if (stored === undefined) await db.insertInto('kernel_settings').values({ name, value }).execute()
    else await db.updateTable('kernel_settings').set({ value }).where('name', '=', name).execute()
  }
}

/** The sealed columns these plugins declare, each with the plugin's name. */
export function pluginSealedColumns(plugins: readonly Plugin[]): (SealedColumn & { plugin: string })[] {
  return plugins.flatMap((plugin) => (plugin.sealedColumns ?? []).map((column) => ({ ...column, plugin: plugin.name })))
}

/** Every plugin that ever started here with sealed columns, as it declared them last. */
export async function recordedSealedColumns(db: Kysely<CoreTables>): Promise<SealedColumnRecord[]> {
  const rows = await db.selectFrom('kernel_settings').select(['name', 'value']).where('name', 'like', `${recordPrefix}%`).execute()
  // LIKE reads `_` as any character: the prefix is checked exactly here.
  return rows.filter((row) => row.name.startsWith(recordPrefix)).map((row) => JSON.parse(row.value) as SealedColumnRecord)
}
