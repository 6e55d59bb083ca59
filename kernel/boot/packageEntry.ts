import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { PluginError } from './pluginError.ts'

/**
 * The file a plugin package or folder is imported from, by the rules Node's ES module
 * loader follows, since a plugin is an ES module (keygate/sdk is ESM only): the
 * package.json `exports` "." entry under the conditions `import`, `node` and `default`,
 * else its `main`, else an index file. (createRequire().resolve, CommonJS, knows no
 * `import` condition and reads no `exports` of a folder.)
 */

const conditions = new Set(['import', 'node', 'default'])
export const indexFiles = ['index.ts', 'index.js', 'index.mjs']

/** The target an `exports` value gives for the conditions above, or null. */
function exportTarget(value: unknown): string | null {
  if (typeof value === 'string') return value
  if (Array.isArray(value)) {
    for (const item of value) {
      const target = exportTarget(item)
      if (target !== null) return target
    }
    return null
  }
  if (value && typeof value === 'object') {
    for (const [condition, nested] of Object.entries(value)) {
      if (!conditions.has(condition)) continue
      const target = exportTarget(nested)
      if (target !== null) return target
    }
  }
  return null
}

/** `exports` for one subpath ('.' or './sub'), with its sugar forms: a string, or conditions without subpath keys. */
function exported(exports: unknown, subpath: string): unknown {
  const bySubpath = exports !== null && typeof exports === 'object' && !Array.isArray(exports) && Object.keys(exports).some((key) => key.startsWith('.'))
  if (bySubpath) return (exports as Record<string, unknown>)[subpath]
  return subpath === '.' ? exports : undefined
}

const isFile = (file: string) => existsSync(file) && statSync(file).isFile()

/**
 * The entry file of the package or folder `folder` (`subpath` './sub' for a package
 * specifier with a path after its name); `what` names it in a PluginError.
 */
export function packageEntry(folder: string, what: string, subpath = '.'): string {
  const manifestFile = join(folder, 'package.json')
  let manifest: { exports?: unknown; main?: unknown } = {}
  if (existsSync(manifestFile)) {
    try {
      manifest = JSON.parse(readFileSync(manifestFile, 'utf8'))
    } catch (error) {
      throw new PluginError(`${what}: ${manifestFile} is not valid JSON: ${(error as Error).message}`)
    }
  }
  if (manifest.exports !== undefined) {
    const target = exportTarget(exported(manifest.exports, subpath))
    if (target === null) throw new PluginError(`${what}: its package.json exports no "${subpath}" for import (conditions import, node or default)`)
    const file = join(folder, target)
    if (!isFile(file)) throw new PluginError(`${what}: its package.json exports "${subpath}" as ${target}, which does not exist in ${folder} (is it built?)`)
    return realpathSync(file)
  }
  if (subpath !== '.') {
    const file = join(folder, subpath)
    if (!isFile(file)) throw new PluginError(`${what}: ${file} does not exist`)
    return realpathSync(file)
  }
  const candidates = typeof manifest.main === 'string' ? [manifest.main, `${manifest.main}.js`, join(manifest.main, 'index.js')] : []
  const file = [...candidates, ...indexFiles].map((name) => join(folder, name)).find(isFile)
  if (!file) throw new PluginError(`${what}: the folder ${folder} has no entry point (package.json "exports" or "main", or ${indexFiles.join(', ')})`)
  return realpathSync(file)
}

/** The folder of the installed package `name` (`keygate-plugin-x`, `@team/plugin`), looked up in node_modules from `startDir` upwards. */
export function installedPackage(name: string, startDir: string): string | null {
  for (let dir = startDir; ; dir = dirname(dir)) {
    const folder = join(dir, 'node_modules', name)
    if (existsSync(join(folder, 'package.json'))) return folder
    if (dirname(dir) === dir) return null
  }
}

/** A package specifier split into its name and its subpath ('.' or './rest'). */
export function splitSpecifier(specifier: string): { name: string; subpath: string } {
  const parts = specifier.split('/')
  const length = specifier.startsWith('@') ? 2 : 1
  const rest = parts.slice(length).join('/')
  return { name: parts.slice(0, length).join('/'), subpath: rest === '' ? '.' : `./${rest}` }
}
