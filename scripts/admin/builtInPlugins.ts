import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Plugin } from '../../kernel/plugin.ts'
import { loadPlugins } from '../../kernel/boot/pluginLoader.ts'

/** plugins/ of this checkout: beside scripts/ in the source and in dist/ alike. */
const builtInFolder = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'plugins')

/**
 * Every built-in plugin (plugins/<name>), enabled in the config or not: their code ships
 * with the CLI, so a command can act for one that is disabled (a master-key rotation
 * re-seals its sealed columns). Loaded, never started.
 */
export function builtInPlugins(): Promise<Plugin[]> {
  const names = readdirSync(builtInFolder, { withFileTypes: true }).filter((entry) => entry.isDirectory()).map((entry) => entry.name).sort()
  return loadPlugins(names)
}
