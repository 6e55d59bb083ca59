import { CompiledQuery, valueListers, type Dialect, type Kysely } from '../../kernel/sdk.ts'

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

/** Every write is given `trx`, a transaction that a failed statement rolls back whole (see below). */
export interface BulkWriter {
  /** Inserts `rows`, each holding every one of `columns`. */
  insert(trx: Kysely<any>, columns: readonly string[], rows: readonly BulkRow[]): Promise<void>
  /**
   * Writes `update` columns over people that exist, found by (parent, custno, source_id),
   * which every row holds, as an upsert (the insert half never runs: the rows were read
   * in the same transaction; a row gone meanwhile would be written afresh, not lost).
   * `raise` columns (numbers) keep the larger of the stored and the given value, decided
   * by the database on the row it writes, so a concurrent writer's larger value stands.
   */
  upsert(trx: Kysely<any>, columns: readonly string[], update: readonly string[], rows: readonly BulkRow[], raise?: readonly string[]): Promise<void>
}

/** `table` is `people`, or a copy of it (the benchmark times the same writes into one, scripts/bench/importFloor.ts). */
export function bulkWriter(dialect: Dialect, table = 'people'): BulkWriter {
  const quote = dialect === 'mysql' ? (name: string) => `\`${name}\`` : (name: string) => `"${name}"`
  // SQLite: 'or fail', since every caller writes inside a transaction that a failed
  // statement rolls back whole. A plain insert must be able to undo its own rows, so
  // SQLite copies each page a 1,000-row statement touches (some 15 MB over people's 22
  // indexes) into a statement journal in a temporary file: the database alone took
  // 2.8-3.1 s to write 100,000 people that way, 2.4-2.5 s without (docs/benchmarks.md).
  const insert = dialect === 'sqlite' ? 'insert or fail into' : 'insert into'
  const insertText = (columns: readonly string[], count: number) => {
    const tuple = `(${columns.map(() => '?').join(', ')})`
    return `${insert} ${quote(table)} (${columns.map(quote).join(', ')}) values ${Array(count).fill(tuple).join(', ')}`
  }
  const given = (column: string) => dialect === 'mysql' ? `values(${quote(column)})` : `excluded.${quote(column)}`
  // greatest()/max() are NULL when either side is; a stored NULL yields to the given value.
  const larger = (column: string) => `coalesce(${dialect === 'mysql' ? 'greatest' : 'max'}(${quote(column)}, ${given(column)}), ${given(column)})`
  const onConflict = (update: readonly string[], raise: readonly string[]) => {
    const sets = [...update.map((column) => `${quote(column)} = ${given(column)}`), ...raise.map((column) => `${quote(column)} = ${larger(column)}`)].join(', ')
    return dialect === 'mysql' ? ` on duplicate key update ${sets}` : ` on conflict (${identity.map(quote).join(', ')}) do update set ${sets}`
  }

  // A keyed read by a changing column name cost 23 ms per 10,000 rows, the compiled reads 6.
  const listValues = valueListers()

  async function write(trx: Kysely<any>, columns: readonly string[], rows: readonly BulkRow[], suffix: string) {
    const valuesOf = listValues(columns)
    for (let at = 0; at < rows.length; at += rowsPerStatement) {
      const part = rows.slice(at, at + rowsPerStatement)
      await trx.executeQuery(CompiledQuery.raw(insertText(columns, part.length) + suffix, valuesOf(part)))
    }
  }

  return {
    insert: (trx, columns, rows) => write(trx, columns, rows, ''),
    upsert: (trx, columns, update, rows, raise = []) => write(trx, columns, rows, onConflict(update, raise)),
  }
}
