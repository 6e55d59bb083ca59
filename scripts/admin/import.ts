import { createInterface } from 'node:readline'
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { sql, type Kysely } from 'kysely'
import { openDatabase } from '../../kernel/storage/database.ts'
import { coreMigrations } from '../../kernel/storage/coreMigrations.ts'
import { migrate } from '../../kernel/storage/migrator.ts'
import { loadPlugins } from '../../kernel/boot/pluginLoader.ts'
import { loadMasterKey, SecretBox } from '../../kernel/auth/secrets.ts'
import { UsageError, type AdminCommand } from './command.ts'
import { blobBytes, dataTables, decodeValue, photosFolder, type ExportHeader } from './tables.ts'

const progressEvery = 10_000
// Bound values per statement below SQLite's 32766 and MySQL's 65535 placeholders.
const valuesPerInsert = 20_000
/**
 * Bytes of blob values after which an insert is sent. The driver writes a blob into the
 * SQL text as hex (twice its size), and MariaDB's max_allowed_packet is 16 MiB by
 * default: 2 MiB plus one image of at most 5 MiB stays under it.
 */
const maxBatchBytes = 2 * 1024 * 1024

class ImportError extends Error {}

/**
 * `import < FILE`: an export read line by line into an EMPTY database (no first start
 * yet), in one transaction: all of it or nothing. Ids are kept, so MySQL's and
 * SQLite's auto-increment continue after the highest one. Before committing, the
 * configured master key must open the imported day secret: otherwise no key would work.
 */
export const importCommand: AdminCommand = {
  usage: '  import < FILE                                     an export into an empty database (before its first start)',
  async run(session, words) {
    if (words.length > 0) throw new UsageError('usage: import < FILE')
    if (process.stdin.isTTY) throw new UsageError('import reads an export on stdin: admin import < keygate.jsonl')
    const { config } = session
    if (!config.masterKey && !existsSync(join(config.dataDir, 'master.key'))) {
      throw new ImportError(`no master key here: copy the source's master.key to ${join(config.dataDir, 'master.key')} or set MASTER_KEY to the source's key (sealed secrets need the same key)`)
    }
    const secrets = new SecretBox(loadMasterKey(config.masterKey, config.dataDir))
    const plugins = await loadPlugins(config.plugins)
    const database = openDatabase(config)
    await mkdir(config.dataDir, { recursive: true, mode: 0o700 })
    const staging = await mkdtemp(join(config.dataDir, '.import-'))
    try {
      const { db, dialect } = database
      await migrate(db, dialect, 'kernel', coreMigrations(dialect))
      for (const plugin of plugins) if (plugin.migrations) await migrate(db, dialect, plugin.name, plugin.migrations)
      const any = db as unknown as Kysely<any>
      const present = await dataTables(any, dialect)
      for (const table of present) {
        if (await any.selectFrom(table).select(any.fn.countAll().as('n')).limit(1).executeTakeFirst().then((row) => Number(row?.n) > 0)) {
          throw new ImportError(`this database is not empty (table ${table} has rows): import goes into a new, empty database, before its first start`)
        }
      }
      const lines = createInterface({ input: process.stdin, crlfDelay: Infinity })[Symbol.asyncIterator]()
      const first = await lines.next()
      const header = parseLine(first.done ? '' : first.value, 1) as ExportHeader
      if (header.format !== 'keygate-export' || header.version !== 1 || !Array.isArray(header.tables)) throw new ImportError('line 1: not a keygate export (no keygate-export header)')
      const missing = header.tables.filter((table) => !present.includes(table))
      if (missing.length) throw new ImportError(`the export has tables this database lacks (${missing.join(', ')}): enable the same plugins as the source (PLUGINS)`)
      console.error(`admin: importing an export of ${header.source} made ${header.exportedAt}`)

      const staged: string[] = []
      const summary = await db.transaction().execute(async (trx) => {
        const handle = trx as unknown as Kysely<any>
        const counts: Record<string, number> = {}
        let batch: Record<string, unknown>[] = []
        let batchTable = ''
        let batchLimit = 1
        let total = 0
        // Blob columns (photos) can make rows large: a batch also ends at maxBatchBytes, under MariaDB's max_allowed_packet.
        let batchBytes = 0
        const flush = async () => {
          if (batch.length) await handle.insertInto(batchTable).values(batch).execute()
          batch = []
          batchBytes = 0
        }
        let ended: { rows: Record<string, number>; files: number } | null = null
        for (let number = 2; ; number++) {
          const next = await lines.next()
          if (next.done) break
          if (next.value.trim() === '') continue
          if (ended) throw new ImportError(`line ${number}: lines after the end line`)
          const line = parseLine(next.value, number) as { table?: string; row?: Record<string, unknown>; file?: string; base64?: string; end?: boolean; rows?: Record<string, number>; files?: number }
          if (typeof line.table === 'string' && line.row && typeof line.row === 'object') {
            if (!header.tables.includes(line.table)) throw new ImportError(`line ${number}: table ${line.table} is not in the header`)
            if (line.table !== batchTable) {
              await flush()
              batchTable = line.table
              batchLimit = Math.max(1, Math.floor(valuesPerInsert / Math.max(1, Object.keys(line.row).length)))
            }
            const row: Record<string, unknown> = {}
            for (const [column, value] of Object.entries(line.row)) row[column] = decodeValue(value)
            batchBytes += blobBytes([row])
            batch.push(row)
            counts[line.table] = (counts[line.table] ?? 0) + 1
            if (batch.length >= batchLimit || batchBytes >= maxBatchBytes) await flush()
            if (++total % progressEvery === 0) console.error(`admin: import: ${total} rows (${line.table})`)
          } else if (typeof line.file === 'string' && typeof line.base64 === 'string') {
            await flush()
            const parts = line.file.split('/')
            if (parts[0] !== photosFolder || parts.some((part) => part === '' || part === '.' || part === '..')) throw new ImportError(`line ${number}: file ${line.file} is not under ${photosFolder}/`)
            const target = join(staging, ...parts)
            await mkdir(dirname(target), { recursive: true, mode: 0o700 })
            await writeFile(target, Buffer.from(line.base64, 'base64'), { mode: 0o600 })
            staged.push(line.file)
          } else if (line.end === true) {
            await flush()
            ended = { rows: line.rows ?? {}, files: Number(line.files ?? 0) }
          } else {
            throw new ImportError(`line ${number}: neither a row, a file nor the end line`)
          }
        }
        if (!ended) throw new ImportError('the export ends early (no end line): it was cut off; nothing was imported')
        for (const table of header.tables) {
          if ((counts[table] ?? 0) !== (ended.rows[table] ?? 0)) throw new ImportError(`table ${table}: ${counts[table] ?? 0} rows read, the end line says ${ended.rows[table] ?? 0}; nothing was imported`)
        }
        if (staged.length !== ended.files) throw new ImportError(`${staged.length} photo files read, the end line says ${ended.files}; nothing was imported`)
        const daySecret = await handle.selectFrom('kernel_settings').select('value').where('name', '=', 'day_secret').executeTakeFirst()
        if (daySecret) {
          try {
            secrets.open(daySecret.value, 'day-secret')
          } catch {
            throw new ImportError('the master key does not open the imported data: use the source\'s master key (its MASTER_KEY or dataDir/master.key); nothing was imported')
          }
        }
        return { total, tables: Object.keys(counts).length }
      }).catch(async (error: unknown) => {
        // InnoDB keeps the ids a rolled-back insert took: a first start after a refused import would number its keys and groups from there.
        if (dialect === 'mysql') for (const table of present) await sql`alter table ${sql.table(table)} auto_increment = 1`.execute(db).catch(() => undefined)
        throw error
      })
      for (const file of staged) {
        const target = join(config.dataDir, ...file.split('/'))
        await mkdir(dirname(target), { recursive: true, mode: 0o700 })
        await rename(join(staging, ...file.split('/')), target)
      }
      console.error(`admin: imported ${summary.total} rows into ${summary.tables} tables and ${staged.length} photo files`)
      return { Rows: summary.total, Tables: summary.tables, Files: staged.length }
    } catch (error) {
      if (error instanceof ImportError) throw new Error(error.message)
      throw error
    } finally {
      await rm(staging, { recursive: true, force: true })
      await database.close()
    }
  },
}

function parseLine(text: string, number: number): unknown {
  try {
    const value = JSON.parse(text)
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('not an object')
    return value
  } catch (error) {
    throw new ImportError(`line ${number}: not a JSON object (${(error as Error).message})`)
  }
}
