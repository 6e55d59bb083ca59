import { existsSync, readdirSync, statSync } from 'node:fs'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { Plugin } from '../plugin.ts'
import { withHistoryFile } from './pluginHistory.ts'
import { indexFiles, installedPackage, packageEntry, splitSpecifier } from './packageEntry.ts'
import { PluginError } from './pluginError.ts'

const builtInFolder = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'plugins')
const pluginName = /^[a-z][a-z0-9-]*$/
/** A plugin's migrations are kept in `migrations_<name>`: MySQL allows 64 characters in a table name. */
export const pluginNameMaxLength = 64 - 'migrations_'.length

/**
 * Names a plugin from a folder or a package may not take: `kernel` (its migrations would
 * share the kernel's `migrations_kernel`) and every built-in plugin's, enabled or not (it
 * would inherit that plugin's migrations, tables and default-group markers).
 */
const reservedNames = (): Set<string> => new Set(['kernel', ...readdirSync(builtInFolder).filter((name) => pluginName.test(name))])

/** Where a config `plugins` entry points: a built-in name, a folder path, or an npm package. */
function locate(entry: string, baseDir: string): { url: string; what: string; builtIn: boolean } {
  const isPath = entry.startsWith('./') || entry.startsWith('../') || isAbsolute(entry)
  if (!isPath && pluginName.test(entry) && existsSync(join(builtInFolder, entry))) {
    const file = indexFiles.map((name) => join(builtInFolder, entry, name)).find(existsSync)
    if (!file) throw new PluginError(`plugin '${entry}' has no index file in ${join(builtInFolder, entry)}`)
    return { url: pathToFileURL(file).href, what: `plugins/${entry}`, builtIn: true }
  }
  if (isPath) {
    const folder = resolve(baseDir, entry)
    if (!existsSync(folder)) throw new PluginError(`plugin folder ${folder} does not exist`)
    if (!statSync(folder).isDirectory()) throw new PluginError(`plugin entry ${folder} is not a folder (name the folder that holds its package.json or index file)`)
    return { url: pathToFileURL(packageEntry(folder, `plugin folder ${folder}`)).href, what: folder, builtIn: false }
  }
  // An installed package: looked up from `baseDir`, then from keygate's own install.
  const { name, subpath } = splitSpecifier(entry)
  const folder = installedPackage(name, baseDir) ?? installedPackage(name, dirname(fileURLToPath(import.meta.url)))
  if (!folder) throw new PluginError(`plugin '${entry}' is enabled in config but is neither a built-in plugin, a folder nor an installed npm package`)
  return { url: pathToFileURL(packageEntry(folder, `package ${entry}`, subpath)).href, what: `package ${entry}`, builtIn: false }
}

/**
 * The config's `plugins`, plus the built-in web console while `console.enabled` (its
 * own switch, default on: it has no routes and no tables, only static files).
 */
export function enabledPlugins(config: { plugins: readonly string[]; console?: { enabled: boolean } }): readonly string[] {
  if (config.console?.enabled === false || config.plugins.includes('console')) return config.plugins
  return [...config.plugins, 'console']
}

/**
 * Loads the enabled plugins in config order (each module's default export, or its
 * `plugin` export). A config entry is a built-in plugin's name (`plugins/<name>/`), a
 * folder path (`./`, `../` or absolute, relative to `baseDir`), or an installed npm
 * package: a team keeps its plugin in its own repository and imports `keygate/sdk`.
 * Plugins given directly (tests, embedders) come after, in their order.
 */
export async function loadPlugins(entries: readonly string[], extra: readonly Plugin[] = [], baseDir = process.cwd()): Promise<Plugin[]> {
  const plugins: Plugin[] = []
  const reserved = reservedNames()
  const add = (plugin: Plugin, what: string, external: boolean) => {
    checkShape(plugin, what)
    if (!pluginName.test(plugin.name)) throw new PluginError(`${what}: plugin name '${plugin.name}' must be lower-case letters, digits and dashes`)
    if (plugin.name.length > pluginNameMaxLength) throw new PluginError(`${what}: plugin name '${plugin.name}' is ${plugin.name.length} characters long; at most ${pluginNameMaxLength} (its migrations table migrations_<name> must fit MySQL's 64)`)
    if (external && reserved.has(plugin.name)) throw new PluginError(`${what}: plugin name '${plugin.name}' is reserved (${plugin.name === 'kernel' ? "the kernel's own" : 'a built-in plugin'}); give the plugin another name`)
    if (plugins.some((loaded) => loaded.name === plugin.name)) throw new PluginError(`plugin '${plugin.name}' is loaded twice`)
    checkDefaultGroups(plugin)
    checkMigrations(plugin)
    checkSealedColumns(plugin)
    plugins.push(plugin)
  }
  for (const entry of entries) {
    const { url, what, builtIn } = locate(entry, baseDir)
    const module = await importEntry(url, what)
    const plugin = module.default ?? module.plugin
    if (builtIn && plugin?.name !== entry) throw new PluginError(`plugins/${entry}/index.ts must export default a Plugin named '${entry}'`)
    // Checked before its history file is read, which would otherwise fail on a missing export as a TypeError.
    checkShape(plugin, what)
    // A plugin ships its change history as history.json beside its entry file.
    add(withHistoryFile(plugin as Plugin, dirname(fileURLToPath(url))), what, !builtIn)
  }
  for (const plugin of extra) add(plugin, `plugin '${plugin.name}'`, false)
  return plugins
}

/**
 * The plugin module itself: one that does not parse, or throws or misses an import
 * while it loads, stops the start naming its folder and file, since the error alone
 * ("Unexpected end of input") says neither.
 */
async function importEntry(url: string, what: string): Promise<{ default?: Plugin; plugin?: Plugin }> {
  try {
    return (await import(url)) as { default?: Plugin; plugin?: Plugin }
  } catch (error) {
    const failure = error as Error
    throw new PluginError(`plugin ${what}: its entry ${fileURLToPath(url)} cannot be loaded: ${failure?.name ?? 'Error'}: ${String(failure?.message ?? error).split('\n')[0]}`)
  }
}

/** A module's export that is no plugin at all (a JavaScript plugin gets no type check). */
function checkShape(plugin: Plugin | undefined, what: string): asserts plugin is Plugin {
  if (!plugin || typeof plugin.setup !== 'function' || typeof plugin.name !== 'string') throw new PluginError(`${what} does not export a plugin (default export with a name and a setup function)`)
}

/**
 * A plugin written in JavaScript gets no type check: its default groups are checked here,
 * once, so a wrong shape stops the start naming plugin and group, not as a database error.
 */
function checkDefaultGroups(plugin: Plugin): void {
  const groups: unknown = plugin.defaultGroups
  if (groups === undefined) return
  if (!Array.isArray(groups)) throw new PluginError(`plugin '${plugin.name}': defaultGroups must be an array of { name, paths }`)
  for (const group of groups as { name?: unknown; paths?: unknown }[]) {
    if (typeof group?.name !== 'string' || group.name.trim() === '') throw new PluginError(`plugin '${plugin.name}': every default group needs a name`)
    const named = `plugin '${plugin.name}', default group '${group.name}'`
    if (!Array.isArray(group.paths)) throw new PluginError(`${named}: paths must be an array of { path, displayName }`)
    for (const entry of group.paths as { path?: unknown; displayName?: unknown }[]) {
      if (typeof entry?.path !== 'string' || !entry.path.startsWith('/')) throw new PluginError(`${named}: each path is { path: '/...', displayName }, got ${JSON.stringify(entry)}`)
      if (typeof entry.displayName !== 'string') throw new PluginError(`${named}: path ${entry.path} needs a displayName`)
    }
  }
}

/** Its migrations, checked at load: a wrong shape would fail after the kernel's own migrations, as a TypeError. */
function checkMigrations(plugin: Plugin): void {
  const migrations: unknown = plugin.migrations
  if (migrations === undefined) return
  if (typeof migrations !== 'object' || migrations === null || Array.isArray(migrations)) throw new PluginError(`plugin '${plugin.name}': migrations is an object of { '0001-name': { up(db, dialect) } }`)
  for (const [name, migration] of Object.entries(migrations)) {
    if (typeof (migration as { up?: unknown } | null)?.up !== 'function') throw new PluginError(`plugin '${plugin.name}': migration '${name}' needs an up(db, dialect) function`)
  }
}

/** Its sealed columns (where it keeps `secrets.seal`ed values), checked at load for the same reason. */
function checkSealedColumns(plugin: Plugin): void {
  const columns: unknown = plugin.sealedColumns
  if (columns === undefined) return
  const shape = `plugin '${plugin.name}': sealedColumns is an array of { table, idColumn, column, contextPrefix }`
  if (!Array.isArray(columns)) throw new PluginError(shape)
  for (const column of columns as Record<string, unknown>[]) {
    if (!['table', 'idColumn', 'column', 'contextPrefix'].every((field) => typeof column?.[field] === 'string' && column[field] !== '')) throw new PluginError(`${shape}, got ${JSON.stringify(column)}`)
  }
}
