/**
 * Plugins reach the kernel through one module, kernel/sdk.ts (issue 11): any other
 * import of a kernel file from a plugin fails here, as does an import of another plugin
 * or of kysely (the sdk re-exports what a plugin with tables needs of it).
 */
import t from 'tap'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

const repository = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const pluginsFolder = join(repository, 'plugins')
const sdk = join(repository, 'kernel', 'sdk.ts')

function sourceFiles(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name)
    // .tsx too: the console's pages are plugin code like any other.
    return statSync(path).isDirectory() ? sourceFiles(path) : /\.(ts|tsx|mts|cts|js|jsx|mjs|cjs)$/.test(name) ? [path] : []
  })
}

// import/export ... from 'x', import('x'), and the bare side-effect import 'x' (which runs a kernel module as surely).
const importPattern = /(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|(?:^|\n)\s*import\s*['"]([^'"]+)['"]/g

t.test('every plugin imports the kernel only through kernel/sdk.ts, and no other plugin', async (t) => {
  const files = sourceFiles(pluginsFolder)
  t.ok(files.length > 10, 'the plugins were read')
  for (const file of files) {
    const plugin = relative(pluginsFolder, file).split(sep)[0]
    const text = readFileSync(file, 'utf8')
    for (const match of text.matchAll(importPattern)) {
      const specifier = match[1] ?? match[2] ?? match[3]
      // Kysely comes through the sdk too, so a plugin outside the repository needs no copy of its own.
      if (specifier === 'kysely') t.fail(`${relative(repository, file)} imports kysely: take it from kernel/sdk.ts`)
      if (!specifier.startsWith('.')) continue
      const target = resolve(dirname(file), specifier)
      const where = `${relative(repository, file)} imports ${specifier}`
      if (target.startsWith(join(repository, 'kernel') + sep)) t.equal(target, sdk, where)
      else if (target.startsWith(pluginsFolder + sep)) t.equal(relative(pluginsFolder, target).split(sep)[0], plugin, where)
      else t.fail(`${where}: outside kernel/sdk.ts and its own folder`)
    }
  }
})

t.test('the check itself catches a reach into the kernel', async (t) => {
  const text = "import { issueKey } from '../../kernel/auth/keyIssuer.ts'\n"
  const specifiers = [...text.matchAll(importPattern)].map((match) => match[1] ?? match[2] ?? match[3])
  t.same(specifiers, ['../../kernel/auth/keyIssuer.ts'])
  const sideEffect = "import '../../kernel/boot/config.ts'\nimport './style.css'\n"
  t.same([...sideEffect.matchAll(importPattern)].map((match) => match[1] ?? match[2] ?? match[3]), ['../../kernel/boot/config.ts', './style.css'], 'a bare import is read too')
  t.ok(sourceFiles(pluginsFolder).some((file) => file.endsWith('.tsx')), 'the console pages (.tsx) are read too')
})
