/**
 * `npm run build` (also `prepare`, so `npm install`/`npm ci` leave a checkout built):
 * TypeScript compiled once into dist/ (tsconfig.build.json rewrites the `.ts` imports to
 * `.js`), then every non-TypeScript file under plugins/ (history.json, static files)
 * copied beside the compiled plugin, where the plugin finds it from its own module URL.
 * config/ is not copied: the kernel reads it from the checkout (kernel/boot/packageRoot.ts).
 * Last, Vite builds the web console (plugins/console/web, TypeScript + Preact + uPlot)
 * into dist/console, which the console plugin serves at /console/.
 */
import { spawnSync } from 'node:child_process'
import { closeSync, cpSync, existsSync, openSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const dist = join(root, 'dist')
const stamp = join(dist, '.built')

/** The newest modification time of the files the build reads. */
function newestSource() {
  let newest = 0
  const visit = (path) => {
    const stat = statSync(path, { throwIfNoEntry: false })
    if (!stat) return
    if (stat.isDirectory()) {
      for (const name of readdirSync(path)) if (name !== 'node_modules' && name !== 'dist') visit(join(path, name))
    } else newest = Math.max(newest, stat.mtimeMs)
  }
  for (const path of ['kernel', 'plugins', 'package.json', 'tsconfig.json', 'tsconfig.build.json']) visit(join(root, path))
  return newest
}

const isStale = () => (statSync(stamp, { throwIfNoEntry: false })?.mtimeMs ?? 0) < newestSource()

// `npm start` (prestart): build only when a source is newer than the last build, so a
// checkout updated with git pull never serves the code of the install before. Several
// `npm start`s at once (docs/scaling.md) take turns on a lock file: one builds, the
// others wait for it and then find the build fresh.
if (process.argv.includes('--if-stale')) {
  if (!isStale()) process.exit(0)
  const lock = join(root, '.build.lock')
  const pause = new Int32Array(new SharedArrayBuffer(4))
  for (;;) {
    try {
      closeSync(openSync(lock, 'wx'))
      break
    } catch (error) {
      if (error.code !== 'EEXIST') throw error
      // A lock left by a build that died (older than 5 minutes) is taken over.
      if (Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) > 300_000) rmSync(lock, { force: true })
      else Atomics.wait(pause, 0, 0, 200)
    }
  }
  process.on('exit', () => rmSync(lock, { force: true }))
  if (!isStale()) process.exit(0)
  console.error('keygate build: the sources changed since the last build; building')
}
let tsc
try {
  tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc')
} catch {
  // `npm ci --omit=dev` on an already built tree (the container's runtime stage): nothing to do.
  if (process.env.npm_lifecycle_event === 'prepare' || process.env.npm_lifecycle_event === 'prestart') {
    console.warn('keygate build: typescript is not installed (dev dependencies omitted); skipped')
    process.exit(0)
  }
  console.error('keygate build: typescript is not installed; run npm install first')
  process.exit(1)
}
// Built beside dist/ and swapped in when complete: a service, a test or a plugin reading
// dist/ while a build runs (tests run in parallel with the one that builds) never finds
// it half written or gone.
const next = join(root, `.dist-building-${process.pid}`)
rmSync(next, { recursive: true, force: true })
process.on('exit', () => rmSync(next, { recursive: true, force: true }))
const compiled = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', next], { cwd: root, stdio: 'inherit' })
if (compiled.status !== 0) process.exit(compiled.status ?? 1)
const webSources = join(root, 'plugins', 'console', 'web')
cpSync(join(root, 'plugins'), join(next, 'plugins'), {
  recursive: true,
  // The console's browser sources are built by Vite below, not copied.
  filter: (source) => source !== webSources && (!source.endsWith('.ts') || source.endsWith('.d.ts')),
})
if (!existsSync(join(next, 'kernel', 'boot', 'main.js'))) {
  console.error('keygate build: dist/kernel/boot/main.js is missing after the build')
  process.exit(1)
}

// The console: hashed assets under assets/ (served immutable), no inline script (the CSP forbids it).
const { build } = await import('vite')
await build({
  root: webSources,
  base: '/console/',
  configFile: false,
  logLevel: 'warn',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: join(next, 'console'),
    emptyOutDir: true,
    target: 'es2022',
    // Every asset a file of its own: a data: URL for a module would need a wider CSP.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
})
if (!existsSync(join(next, 'console', 'index.html'))) {
  console.error('keygate build: dist/console/index.html is missing after the build')
  process.exit(1)
}
writeFileSync(join(next, '.built'), new Date().toISOString() + '\n')
// Two renames: dist/ is missing only between them, never for the length of a build.
const previous = join(root, `.dist-previous-${process.pid}`)
if (existsSync(dist)) renameSync(dist, previous)
renameSync(next, dist)
rmSync(previous, { recursive: true, force: true })
