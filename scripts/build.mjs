/**
 * `npm run build` (also `prepare`, so `npm install`/`npm ci` leave a checkout built):
 * TypeScript compiled once into dist/ (tsconfig.build.json rewrites the `.ts` imports to
 * `.js`), then every non-TypeScript file under plugins/ (history.json, static files)
 * copied beside the compiled plugin, where the plugin finds it from its own module URL.
 * config/ is not copied: the kernel reads it from the checkout (kernel/boot/packageRoot.ts).
 */
import { spawnSync } from 'node:child_process'
import { cpSync, existsSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const dist = join(root, 'dist')
let tsc
try {
  tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc')
} catch {
  // `npm ci --omit=dev` on an already built tree (the container's runtime stage): nothing to do.
  if (process.env.npm_lifecycle_event === 'prepare') {
    console.warn('keygate build: typescript is not installed (dev dependencies omitted); skipped')
    process.exit(0)
  }
  console.error('keygate build: typescript is not installed; run npm install first')
  process.exit(1)
}
rmSync(dist, { recursive: true, force: true })
const compiled = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' })
if (compiled.status !== 0) process.exit(compiled.status ?? 1)
cpSync(join(root, 'plugins'), join(dist, 'plugins'), {
  recursive: true,
  filter: (source) => !source.endsWith('.ts') || source.endsWith('.d.ts'),
})
if (!existsSync(join(dist, 'kernel', 'boot', 'main.js'))) {
  console.error('keygate build: dist/kernel/boot/main.js is missing after the build')
  process.exit(1)
}
