import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The folder holding package.json, found by walking up from this module: the same
 * answer whether it runs from its .ts source (kernel/boot) or from the build
 * (dist/kernel/boot), so config/ is always the operator's config/ of the checkout.
 */
function findPackageRoot(): string {
  let folder = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(folder, 'package.json'))) {
    const parent = dirname(folder)
    if (parent === folder) throw new Error('keygate: package.json not found above kernel/boot')
    folder = parent
  }
  return folder
}

export const packageRoot = findPackageRoot()

/** The version in package.json (`keygate --version`, the start line, metrics). */
export const packageVersion: string = (JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version
