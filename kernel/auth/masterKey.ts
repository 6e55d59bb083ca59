import { randomBytes } from 'node:crypto'
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join, relative, resolve, isAbsolute } from 'node:path'
import { makeFolder } from '../storage/makeFolder.ts'

/**
 * Where the master key (D9) comes from. `masterKey` (env MASTER_KEY) is either the key
 * itself (64 hex digits) or the path of a file holding it (anything with a `/`); when
 * unset, the key is generated into `<dataDir>/master.key` (0600).
 *
 * A key file holds one key per line: the first seals, every line opens. A file has more
 * than one line only while `admin master-key rotate` runs (new key first, old after),
 * so an interrupted rotation leaves every row readable, whichever key sealed it.
 */
export type MasterKeySource = { kind: 'value'; key: Buffer } | { kind: 'file'; file: string; generated: boolean }

const hexKey = /^[0-9a-f]{64}$/i

export function masterKeySource(configured: string | null, dataDir: string): MasterKeySource {
  if (configured && hexKey.test(configured)) return { kind: 'value', key: Buffer.from(configured, 'hex') }
  if (configured) return { kind: 'file', file: resolve(configured), generated: false }
  return { kind: 'file', file: join(dataDir, 'master.key'), generated: true }
}

/** A master key file that is missing or holds no key: the start prints it as one line naming masterKey. */
export class MasterKeyFileError extends Error {}

/** The keys in a key file, sealing key first. */
export function readMasterKeyFile(file: string): Buffer[] {
  if (!existsSync(file)) throw new MasterKeyFileError(`master key file ${file} does not exist`)
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    // A folder, or a file this user may not read: the operator's to fix, named as such.
    throw new MasterKeyFileError(`master key file ${file} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
  }
  const lines = text.split('\n').map((line) => line.trim()).filter(Boolean)
  if (lines.length === 0 || !lines.every((line) => hexKey.test(line))) throw new MasterKeyFileError(`${file} does not hold a 64-hex-digit master key`)
  return lines.map((line) => Buffer.from(line, 'hex'))
}

/**
 * Replaces a key file atomically: a new file (0600) is written and flushed beside it,
 * then renamed over it, and the folder flushed, so a crash leaves the old or the new
 * file, never a partial one.
 */
export function writeMasterKeyFile(file: string, keys: readonly Buffer[]): void {
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
  writeFileSync(temporary, keys.map((key) => key.toString('hex')).join('\n') + '\n', { mode: 0o600, flag: 'wx', flush: true } as Parameters<typeof writeFileSync>[2])
  renameSync(temporary, file)
  const folder = openSync(dirname(file), 'r')
  try {
    fsyncSync(folder)
  } finally {
    closeSync(folder)
  }
}

/** Creates `<dataDir>/master.key` unless it exists; when another process made it meanwhile, theirs holds. */
function generateKeyFile(file: string): boolean {
  makeFolder(dirname(file))
  try {
    // 'wx' fails if another process created it meanwhile; then theirs is read.
    writeFileSync(file, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' })
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    return false
  }
}

/** Creates the generated key file (`dataDir/master.key`) when missing; true when this call made it. */
export function makeGeneratedKeyFile(source: MasterKeySource): boolean {
  return source.kind === 'file' && source.generated && !existsSync(source.file) && generateKeyFile(source.file)
}

/** The master keys in use, sealing key first; a missing generated file is created. */
export function loadMasterKeys(source: MasterKeySource): Buffer[] {
  if (source.kind === 'value') return [source.key]
  makeGeneratedKeyFile(source)
  return readMasterKeyFile(source.file)
}

/**
 * The one warning line printed at start while the master key sits in the data folder:
 * a copy of that folder is then everything needed to open every stored secret.
 */
export function masterKeyWarning(configured: string | null, dataDir: string): string | null {
  const source = masterKeySource(configured, dataDir)
  if (source.kind === 'value') return null
  const inside = relative(resolve(dataDir), source.file)
  if (inside.startsWith('..') || isAbsolute(inside)) return null
  return `keygate: warning: the master key is in the data folder (${source.file}); a copy of that folder opens every stored secret. Set MASTER_KEY to the key or to a file outside it (SECURITY.md, "Master key").`
}
