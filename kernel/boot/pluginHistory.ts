import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Ajv } from 'ajv'
import type { HistoryEntry, Plugin } from '../plugin.ts'
import { PluginError } from './pluginError.ts'

/** The shape of one change-history entry (D15); a plugin whose history does not fit stops the start. */
const entrySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['Date', 'Version', 'Kind', 'Breaking', 'Operation', 'Description'],
  properties: {
    Date: { type: 'string', pattern: '^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$' },
    Version: { type: 'string', pattern: '^[0-9]+\\.[0-9]+\\.[0-9]+$' },
    Kind: { enum: ['added', 'modified', 'removed'] },
    Breaking: { enum: [0, 1] },
    Operation: { type: 'string', pattern: '^(GET|POST) /[^\\s]*$' },
    Description: { type: 'string', minLength: 1 },
  },
}
const validateEntry = new Ajv({ strict: true, allErrors: false }).compile<HistoryEntry>(entrySchema)

function checked(entries: unknown, where: string): HistoryEntry[] {
  if (!Array.isArray(entries)) throw new PluginError(`${where} must be an array of change-history entries`)
  entries.forEach((entry, index) => {
    if (!validateEntry(entry)) {
      const error = validateEntry.errors![0]
      throw new PluginError(`${where}, entry ${index}: ${error.instancePath || 'the entry'} ${error.message}`)
    }
  })
  return entries as HistoryEntry[]
}

/** The plugin with the history kept in `<folder>/history.json` when it has one and carries none itself. */
export function withHistoryFile(plugin: Plugin, folder: string): Plugin {
  const file = join(folder, 'history.json')
  if (plugin.history !== undefined || !existsSync(file)) return plugin
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'))
  } catch (error) {
    throw new PluginError(`${file} is not valid JSON: ${(error as Error).message}`)
  }
  return { ...plugin, history: Object.freeze(checked(parsed, file)) }
}

/** Compares two versions part by part as numbers (0.10.0 is after 0.9.0). */
function compareVersions(a: string, b: string): number {
  const left = a.split('.').map(Number)
  const right = b.split('.').map(Number)
  for (let index = 0; index < Math.max(left.length, right.length); index++) {
    const difference = (left[index] ?? 0) - (right[index] ?? 0)
    if (difference !== 0) return difference
  }
  return 0
}

/**
 * `kernel.history()`: every enabled plugin's entries, newest first: by Date, then by
 * Version within a day. Entries of one day and version keep their plugin's order;
 * checked and merged once at start.
 */
export function mergedHistory(plugins: readonly Plugin[]): () => readonly HistoryEntry[] {
  const entries = plugins.flatMap((plugin) => (plugin.history ? checked(plugin.history, `the history of plugin '${plugin.name}'`) : []))
  const newestFirst = (a: HistoryEntry, b: HistoryEntry) => (a.Date < b.Date ? 1 : a.Date > b.Date ? -1 : compareVersions(b.Version, a.Version))
  const merged = Object.freeze(entries.map((entry) => Object.freeze({ ...entry })).sort(newestFirst))
  return () => merged
}

/**
 * Per plugin, its mounted routes (`GET /Path`) that its change history adds nowhere: such a
 * route is served but missing from GET /Api/Read/Changes and its feed. The start warns of
 * them, and goes on (an external plugin without history.json still loads).
 */
export function routesMissingFromHistory(plugins: readonly Plugin[], mounted: readonly { plugin: string; route: { method: string; path: string } }[]): Map<string, string[]> {
  const missing = new Map<string, string[]>()
  for (const plugin of plugins) {
    const added = new Set((plugin.history ?? []).filter((entry) => entry.Kind === 'added').map((entry) => entry.Operation.toLowerCase()))
    const operations = mounted.filter((route) => route.plugin === plugin.name).map(({ route }) => `${route.method} ${route.path}`)
    const unrecorded = operations.filter((operation) => !added.has(operation.toLowerCase()))
    if (unrecorded.length > 0) missing.set(plugin.name, unrecorded)
  }
  return missing
}
