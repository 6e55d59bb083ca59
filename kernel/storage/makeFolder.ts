import { mkdirSync, statSync } from 'node:fs'
import { dirname, resolve } from 'node:path'

/**
 * `mkdir -p` for the data folder and the master key's: each missing folder is made in
 * turn from the nearest that exists, because Node's `{ recursive: true }` loops forever
 * where mkdir answers ENOENT under a folder that exists (`/proc/x`). A path that exists
 * and is not a folder fails with ENOTDIR; every failure keeps its code and `path`, so
 * the start names the setting (kernel/boot/startFailure.ts).
 */
export function makeFolder(path: string, mode = 0o700): void {
  const missing: string[] = []
  let at = resolve(path)
  while (!exists(at)) {
    missing.unshift(at)
    const parent = dirname(at)
    if (parent === at) break
    at = parent
  }
  for (const folder of missing) {
    try {
      mkdirSync(folder, { mode })
    } catch (error) {
      // Another process made it meanwhile: theirs will do.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
  }
  if (!statSync(path).isDirectory()) {
    throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${path}'`), { code: 'ENOTDIR', syscall: 'mkdir', path })
  }
}

function exists(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false }) !== undefined
}
