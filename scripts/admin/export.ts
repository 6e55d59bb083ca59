import { once } from 'node:events'
import { readdir, readFile } from 'node:fs/promises'
import { join, relative, sep } from 'node:path'
import { existsSync } from 'node:fs'
import { UsageError, databaseLabel, type AdminCommand } from './command.ts'
import { dataTables, encodeValue, photosFolder, tableColumns, tablePages, type ExportHeader } from './tables.ts'

const pageSize = 1000
const progressEvery = 10_000

/** Writes one line, waiting when the reader is slower than we are (backpressure). */
async function writeLine(value: unknown): Promise<void> {
  if (!process.stdout.write(JSON.stringify(value) + '\n')) await once(process.stdout, 'drain')
}

async function* filesUnder(folder: string): AsyncGenerator<string> {
  for (const entry of await readdir(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name)
    if (entry.isDirectory()) yield* filesUnder(path)
    else if (entry.isFile()) yield path
  }
}

/**
 * `export > FILE`: every table as JSON lines (one `{table,row}` per row, secrets still
 * sealed under the master key), then the stored photos (`{file,base64}`), then an
 * `{end}` line with the counts, so an import notices a cut-off file.
 */
export const exportCommand: AdminCommand = {
  usage: '  export > FILE                                     every table and photo as JSON lines (secrets stay sealed)',
  async run(session, words) {
    if (words.length > 0) throw new UsageError('usage: export > FILE')
    if (process.stdout.isTTY) throw new UsageError('export writes JSON lines to stdout: redirect it to a file (admin export > keygate.jsonl)')
    const kernel = await session.kernel()
    const db = kernel.database.db as any
    const tables = await dataTables(db, kernel.database.dialect)
    const header: ExportHeader = { format: 'keygate-export', version: 1, source: databaseLabel(session.config), exportedAt: new Date().toISOString(), tables }
    await writeLine(header)
    const counts: Record<string, number> = {}
    let total = 0
    for (const table of tables) {
      counts[table] = 0
      const columns = await tableColumns(db, kernel.database.dialect, table)
      for await (const page of tablePages(db, table, columns, pageSize)) {
        for (const row of page) {
          const encoded: Record<string, unknown> = {}
          for (const column of columns) encoded[column] = encodeValue(row[column])
          await writeLine({ table, row: encoded })
          counts[table]++
          if (++total % progressEvery === 0) console.error(`admin: export: ${total} rows (${table})`)
        }
      }
    }
    let files = 0
    const photos = join(kernel.config.dataDir, photosFolder)
    if (existsSync(photos)) {
      for await (const file of filesUnder(photos)) {
        await writeLine({ file: relative(kernel.config.dataDir, file).split(sep).join('/'), base64: (await readFile(file)).toString('base64') })
        files++
      }
    }
    await writeLine({ end: true, rows: counts, files })
    console.error(`admin: exported ${total} rows from ${tables.length} tables and ${files} photo files`)
    return undefined
  },
}
