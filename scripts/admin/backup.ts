import { closeSync, existsSync, linkSync, openSync, renameSync, rmSync, statSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import SQLite from 'better-sqlite3'
import { UsageError, type AdminCommand } from './command.ts'

/**
 * `backup FILE`: SQLite's online backup API, page by page from a connection of its own,
 * so the service keeps serving meanwhile; the copy is a consistent snapshot. Never
 * overwrites FILE. MySQL/MariaDB have their own tool (mariadb-dump).
 */
export const backup: AdminCommand = {
  usage: '  backup FILE                                       a consistent copy of the SQLite database, while serving',
  async run(session, words) {
    if (words.length !== 1) throw new UsageError('usage: backup FILE')
    const { config } = session
    if (config.databaseUrl) {
      throw new UsageError('backup copies the SQLite database; for MySQL/MariaDB use: mariadb-dump --single-transaction DATABASE > FILE (and keep the master key)')
    }
    const target = resolve(words[0])
    if (existsSync(target)) throw new UsageError(`${target} exists already; backup never overwrites a file`)
    const source = join(config.dataDir, 'keygate.sqlite')
    if (!existsSync(source)) throw new UsageError(`there is no database at ${source}`)
    if (!existsSync(dirname(target))) throw new UsageError(`the folder ${dirname(target)} does not exist`)
    // The copy is made under a name of its own beside FILE and given FILE's name only once it
    // is whole and checked: a backup that fails or is killed (a full disk, kill -9, a reboot)
    // never leaves a cut-short file named FILE that looks like a backup and blocks the next one.
    const partial = join(dirname(target), `${basename(target)}.partial-${process.pid}`)
    // Created owner only before a page is copied (sealed secrets and people's data, like the
    // database itself), not made readable by all for the length of the copy.
    closeSync(openSync(partial, 'wx', 0o600))
    try {
      const keys = await copyAndCheck(source, partial)
      publish(partial, target)
      return { File: target, Bytes: statSync(target).size, Keys: keys }
    } finally {
      rmSync(partial, { force: true })
      rmSync(`${partial}-journal`, { force: true })
    }
  },
}

/** The online backup of `source` into `copy`, made one file and proven to open; answers its key count. */
async function copyAndCheck(source: string, copy: string): Promise<number> {
  const database = new SQLite(source, { fileMustExist: true })
  try {
    database.pragma('busy_timeout = 5000')
    await database.backup(copy)
  } finally {
    database.close()
  }
  // The copy is one file: WAL mode (copied with the pages) would have every opening of it
  // leave -wal and -shm files beside it. The service sets WAL again when it opens a restored copy.
  const single = new SQLite(copy, { fileMustExist: true })
  try {
    single.pragma('journal_mode = DELETE')
  } finally {
    single.close()
  }
  // Prove the copy opens and holds the keys before saying it is good.
  const opened = new SQLite(copy, { readonly: true, fileMustExist: true })
  try {
    const check = opened.pragma('quick_check', { simple: true })
    if (check !== 'ok') throw new Error(`the copy fails its check: ${check}`)
    return (opened.prepare('select count(*) as n from api_keys').get() as { n: number }).n
  } finally {
    opened.close()
  }
}

/**
 * Gives the finished copy FILE's name without ever replacing a file: a hard link fails when
 * FILE appeared meanwhile. A file system without hard links (FAT on a USB disk, some network
 * shares) gets a rename after one more look.
 */
function publish(partial: string, target: string): void {
  try {
    linkSync(partial, target)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EEXIST') throw new UsageError(`${target} exists already; backup never overwrites a file`)
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw error
    if (existsSync(target)) throw new UsageError(`${target} exists already; backup never overwrites a file`)
    renameSync(partial, target)
  }
}
