import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { Plugin } from '../plugin.ts'

const pluginsFolder = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'plugins')
// From the build (dist/) the plugins are compiled too: index.js beside this loader's .js.
const moduleExtension = import.meta.url.endsWith('.ts') ? '.ts' : '.js'

/**
 * Loads the enabled plugins by name from `plugins/<name>/index.ts` (its default
 * export). Plugins given directly (tests, embedders) come after, in their order.
 */
export async function loadPlugins(names: readonly string[], extra: readonly Plugin[] = []): Promise<Plugin[]> {
  const plugins: Plugin[] = []
  for (const name of names) {
    const file = join(pluginsFolder, name, `index${moduleExtension}`)
    if (!existsSync(file)) throw new Error(`plugin '${name}' is enabled in config but ${file} does not exist`)
    const module = (await import(pathToFileURL(file).href)) as { default?: Plugin }
    if (!module.default || module.default.name !== name) throw new Error(`plugins/${name}/index.ts must export default a Plugin named '${name}'`)
    plugins.push(module.default)
  }
  for (const plugin of extra) {
    if (plugins.some((loaded) => loaded.name === plugin.name)) throw new Error(`plugin '${plugin.name}' is loaded twice`)
    plugins.push(plugin)
  }
  return plugins
}
