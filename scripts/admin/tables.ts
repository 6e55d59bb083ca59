import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../../kernel/storage/database.ts'

/** The kernel's tables in an order that satisfies their references; plugin tables follow, by name. */
const kernelOrder = ['kernel_settings', 'api_acl', 'api_groups', 'api_group_acl', 'api_keys', 'api_key_groups', 'api_log', 'api_log_body']

/**
 * Kysely's migration bookkeeping (each database keeps its own, made by migrating it) and
 * the registry of running processes (`kernel_nodes`: who runs now, not data to move; an
 * imported row would hold a node id in the new database for `nodes.expireMs`), and the
 * cache partitions running processes changed lately (`kernel_partition_changes`).
 */
function isBookkeeping(table: string): boolean {
  return table.startsWith('migrations_') || table.startsWith('kysely_') || table === 'kernel_nodes' || table === 'kernel_partition_changes'
}

/**
 * Every data table of this database, kernel and plugins alike, read from the database's
 * own catalogue (so a plugin's tables come along without being named here).
 */
export async function dataTables(db: Kysely<any>, dialect: Dialect): Promise<string[]> {
  const rows = dialect === 'sqlite'
    ? (await sql<{ name: string }>`select name from sqlite_master where type = 'table' and name not like 'sqlite_%'`.execute(db)).rows
    // SHOW rather than information_schema: MariaDB's information_schema has crashed here under load.
    : (await sql<Record<string, string>>`show full tables where Table_type = 'BASE TABLE'`.execute(db)).rows.map((row) => ({ name: Object.values(row)[0] }))
  const names = rows.map((row) => row.name).filter((name) => !isBookkeeping(name))
  const rank = (name: string) => (kernelOrder.includes(name) ? kernelOrder.indexOf(name) : kernelOrder.length)
  return names.sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0))
}

/** The column names of one table, in their declared order. */
export async function tableColumns(db: Kysely<any>, dialect: Dialect, table: string): Promise<string[]> {
  if (dialect === 'sqlite') {
    const rows = (await sql<{ name: string }>`select name from pragma_table_info(${table})`.execute(db)).rows
    return rows.map((row) => row.name)
  }
  const rows = (await sql<{ Field: string }>`show columns from ${sql.table(table)}`.execute(db)).rows
  return rows.map((row) => row.Field)
}

/** Blob bytes a page aims at: a table of photos is read a few rows at a time. */
const pageBytes = 16 * 1024 * 1024

/** Bytes of the blob values (Buffers) in some rows. */
export function blobBytes(page: Record<string, unknown>[]): number {
  let bytes = 0
  for (const row of page) for (const value of Object.values(row)) if (Buffer.isBuffer(value)) bytes += value.length
  return bytes
}

/**
 * Reads a table in pages, never the whole table at once: by `id` where there is one
 * (each page starts after the last id), else by offset in the order of all columns.
 * Pages start small and grow to `firstPageSize` rows while their blobs stay under
 * pageBytes, so a table of photos is never read a thousand images at a time.
 */
export async function* tablePages(db: Kysely<any>, table: string, columns: string[], firstPageSize: number): AsyncGenerator<Record<string, unknown>[]> {
  if (columns.includes('id')) {
    let pageSize = Math.min(firstPageSize, 16)
    let after: number | null = null
    for (;;) {
      const page: Record<string, unknown>[] = await db.selectFrom(table).selectAll()
        .$if(after !== null, (query) => query.where('id', '>', after))
        .orderBy('id').limit(pageSize).execute()
      if (page.length === 0) return
      yield page
      after = Number(page[page.length - 1].id)
      if (page.length < pageSize) return
      const bytes = blobBytes(page)
      pageSize = bytes > pageBytes ? Math.max(1, Math.floor(pageSize * pageBytes / bytes)) : bytes * 2 <= pageBytes ? Math.min(firstPageSize, pageSize * 2) : pageSize
    }
  }
  for (let offset = 0; ; offset += firstPageSize) {
    let query = db.selectFrom(table).selectAll()
    for (const column of columns) query = query.orderBy(column)
    const page: Record<string, unknown>[] = await query.limit(firstPageSize).offset(offset).execute()
    if (page.length === 0) return
    yield page
    if (page.length < firstPageSize) return
  }
}

/** JSON cannot hold bytes: a Buffer (a blob column) travels as { $base64 }. */
export function encodeValue(value: unknown): unknown {
  if (Buffer.isBuffer(value)) return { $base64: value.toString('base64') }
  if (value instanceof Date) return value.getTime()
  return value
}

export function decodeValue(value: unknown): unknown {
  if (value !== null && typeof value === 'object' && typeof (value as { $base64?: unknown }).$base64 === 'string') {
    return Buffer.from((value as { $base64: string }).$base64, 'base64')
  }
  return value
}

/** The first line of an export: what it is and which tables follow. */
export interface ExportHeader {
  format: 'keygate-export'
  version: 1
  source: string
  exportedAt: string
  tables: string[]
}

export const photosFolder = 'photos'
