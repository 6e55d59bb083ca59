import type { Kysely } from 'kysely'
import type { Kernel } from '../../kernel/boot/kernel.ts'
import type { SealedColumn } from '../../kernel/plugin.ts'
import { pluginSealedColumns, recordedSealedColumns } from '../../kernel/boot/sealedColumnRecord.ts'
import { builtInPlugins } from './builtInPlugins.ts'
import { dataTables, tableColumns } from './tables.ts'

export type PluginSealedColumn = SealedColumn & { plugin: string }

/**
 * A master-key rotation would strand secrets: plugins that recorded sealed columns
 * (kernel/boot/sealedColumnRecord.ts) are not loaded in this configuration, and their
 * columns hold values only the old key opens.
 */
export class UnloadedSealedColumns extends Error {
  constructor(readonly columns: readonly PluginSealedColumn[]) {
    const named = columns.map((column) => `'${column.plugin}' (${column.table}.${column.column})`).join(', ')
    const plural = columns.length > 1
    super(
      `master-key rotate refused, nothing was changed: plugin${plural ? 's' : ''} ${named} keep${plural ? '' : 's'} sealed secrets ` +
        `but ${plural ? 'are' : 'is'} not enabled in this configuration; enable ${plural ? 'them' : 'it'} (PLUGINS) for the rotation, ` +
        'or those secrets would never open again',
    )
  }
}

const sameColumn = (a: PluginSealedColumn, b: PluginSealedColumn) => a.plugin === b.plugin && a.table === b.table && a.column === b.column

/**
 * The sealed columns a rotation re-seals: those of the loaded plugins, and those of every
 * built-in plugin whose table and column exist (enabled or not: the CLI has its code).
 * Throws UnloadedSealedColumns, before anything changes, when a recorded column of a
 * plugin outside both holds a value.
 */
export async function sealedColumnPlan(kernel: Kernel): Promise<PluginSealedColumn[]> {
  const { db, dialect } = kernel.database
  const tables = new Set(await dataTables(db, dialect))
  const columnsOf = new Map<string, Set<string>>()
  const exists = async (column: PluginSealedColumn) => {
    if (!tables.has(column.table)) return false
    if (!columnsOf.has(column.table)) columnsOf.set(column.table, new Set(await tableColumns(db, dialect, column.table)))
    return columnsOf.get(column.table)!.has(column.column)
  }

  const plan: PluginSealedColumn[] = [...kernel.sealedColumns]
  const builtIn = pluginSealedColumns(await builtInPlugins())
  for (const column of builtIn) {
    // An enabled built-in is planned already; a disabled one's table exists once it ran.
    if (!plan.some((planned) => sameColumn(planned, column)) && (await exists(column))) plan.push(column)
  }

  const pluginTables = db as unknown as Kysely<Record<string, Record<string, unknown>>>
  const stranded: PluginSealedColumn[] = []
  for (const record of await recordedSealedColumns(db)) {
    for (const declared of record.columns) {
      const column = { ...declared, plugin: record.plugin }
      if (plan.some((planned) => sameColumn(planned, column)) || !(await exists(column))) continue
      // A column with no value loses nothing (a plugin removed for good, its rows deleted).
      const held = await pluginTables.selectFrom(column.table).select(column.column).where(column.column, 'is not', null).limit(1).executeTakeFirst()
      if (held) stranded.push(column)
    }
  }
  if (stranded.length > 0) throw new UnloadedSealedColumns(stranded)
  return plan
}
