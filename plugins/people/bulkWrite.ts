import { CompiledQuery, type Kysely } from 'kysely'
import type { Dialect } from '../../kernel/sdk.ts'

/**
 * Multi-row writes of people for imports: one statement per `rowsPerStatement` rows,
 * its text built directly and its values bound as one flat list. A Kysely builder
 * would turn each of 27,000 values of a statement into a node and compile the tree
 * again for every statement, which cost more than the database's own work.
 *
 * Column names come from our own lists (fields.ts), never from input; values are bound.
 */

/** Rows per statement: 1,000 x 27 columns stays below SQLite's 32,766 and MySQL's 65,535 placeholders. */
export const rowsPerStatement = 1000

/** Columns that identify an imported person: the unique index people_source_id (0001). */
const identity = ['parent', 'custno', 'source_id']

export type BulkRow = Record<string, unknown>

export interface BulkWriter {
  /** Inserts `rows`, each holding every one of `columns`. */
  insert(trx: Kysely<any>, columns: readonly string[], rows: readonly BulkRow[]): Promise<void>
  /**
   * Writes `update` columns over people that exist, found by (parent, custno, source_id),
   * which every row holds, as an upsert (the insert half never runs: the rows were read
   * in the same transaction; a row gone meanwhile would be written afresh, not lost).
   */
  upsert(trx: Kysely<any>, columns: readonly string[], update: readonly string[], rows: readonly BulkRow[]): Promise<void>
}

/**
 * The rows' values in column order as one flat list (absent = NULL), by a function
 * compiled for the column list: its reads by constant names stay fast where one read by
 * a changing name went through V8's generic lookup (10,000 rows of 25 columns: 6 ms
 * against 23). Names are our own columns, quoted as JSON string literals.
 */
function valueLister(columns: readonly string[]): (rows: readonly BulkRow[]) => unknown[] {
  const reads = columns.map((column) => `values[at++] = row[${JSON.stringify(column)}] ?? null`).join('; ')
  return new Function('rows', `
    const values = new Array(rows.length * ${columns.length})
    let at = 0
    for (let index = 0; index < rows.length; index++) { const row = rows[index]; ${reads} }
    return values`) as (rows: readonly BulkRow[]) => unknown[]
}

/** `table` is `people`, or a copy of it (the benchmark times the same writes into one, scripts/bench/importFloor.ts). */
export function bulkWriter(dialect: Dialect, table = 'people'): BulkWriter {
  const quote = dialect === 'mysql' ? (name: string) => `\`${name}\`` : (name: string) => `"${name}"`
  const insertText = (columns: readonly string[], count: number) => {
    const tuple = `(${columns.map(() => '?').join(', ')})`
    return `insert into ${quote(table)} (${columns.map(quote).join(', ')}) values ${Array(count).fill(tuple).join(', ')}`
  }
  const onConflict = (update: readonly string[]) => dialect === 'mysql'
    ? ` on duplicate key update ${update.map((column) => `${quote(column)} = values(${quote(column)})`).join(', ')}`
    : ` on conflict (${identity.map(quote).join(', ')}) do update set ${update.map((column) => `${quote(column)} = excluded.${quote(column)}`).join(', ')}`

  // Per column list (an upsert's depends on the fields the rows gave): bounded, as the
  // lists are the importer's choice.
  const listers = new Map<string, (rows: readonly BulkRow[]) => unknown[]>()
  function listerFor(columns: readonly string[]) {
    const key = columns.join(',')
    let lister = listers.get(key)
    if (lister === undefined) {
      if (listers.size >= 64) listers.clear()
      lister = valueLister(columns)
      listers.set(key, lister)
    }
    return lister
  }

  async function write(trx: Kysely<any>, columns: readonly string[], rows: readonly BulkRow[], suffix: string) {
    const valuesOf = listerFor(columns)
    for (let at = 0; at < rows.length; at += rowsPerStatement) {
      const part = rows.slice(at, at + rowsPerStatement)
      await trx.executeQuery(CompiledQuery.raw(insertText(columns, part.length) + suffix, valuesOf(part)))
    }
  }

  return {
    insert: (trx, columns, rows) => write(trx, columns, rows, ''),
    upsert: (trx, columns, update, rows) => write(trx, columns, rows, onConflict(update)),
  }
}
