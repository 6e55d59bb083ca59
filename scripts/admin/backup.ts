import { chmodSync, existsSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
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
    const database = new SQLite(source, { fileMustExist: true })
    try {
      database.pragma('busy_timeout = 5000')
      await database.backup(target)
    } finally {
      database.close()
    }
    // Like the database itself: sealed secrets and people's data, owner only.
    chmodSync(target, 0o600)
    // The copy is one file: WAL mode (copied with the pages) would have every opening of it
    // leave -wal and -shm files beside it. The service sets WAL again when it opens a restored copy.
    const single = new SQLite(target, { fileMustExist: true })
    try {
      single.pragma('journal_mode = DELETE')
    } finally {
      single.close()
    }
    // Prove the copy opens and holds the keys before saying it is good.
    const copy = new SQLite(target, { readonly: true, fileMustExist: true })
    try {
      const check = copy.pragma('quick_check', { simple: true })
      if (check !== 'ok') throw new Error(`the copy ${target} fails its check: ${check}`)
      const keys = (copy.prepare('select count(*) as n from api_keys').get() as { n: number }).n
      return { File: target, Bytes: statSync(target).size, Keys: keys }
    } finally {
      copy.close()
    }
  },
}
