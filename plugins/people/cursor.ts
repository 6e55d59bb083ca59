import { badRequest, sql, type Expression, type ExpressionBuilder, type SqlBool } from '../../kernel/sdk.ts'
import type { PeopleDatabase } from './scope.ts'
import type { PeopleTable } from './tables.ts'

/**
 * Keyset (cursor) paging of the people listings: `after` names the last row a client
 * has seen by its sort key, and the next page is the rows after that key in the
 * listing's order, found by an index seek however deep the page is (OFFSET would walk
 * every row before it). A cursor is opaque to clients: base64url of JSON
 * `[sort, position, ...key]`, the sort it was made for (a cursor of another sort is
 * refused), the row's 1-based position in the listing (for the Page text) and the
 * row's values of the order columns up to Id, which makes the key unique.
 */

type Column = keyof PeopleTable & string
export type KeyValue = string | number | null

export interface OrderItem {
  column: Column
  direction: 'asc' | 'desc'
}

/** Columns holding numbers; every other sortable column holds text. */
const integerColumns = new Set<Column>(['id', 'created', 'custno', 'date_last', 'date_edit', 'deleted', 'parent'])

/** The order columns that make up a row's key: up to and including Id (later ones never decide). */
export function keyOrder(order: readonly OrderItem[]): OrderItem[] {
  const idAt = order.findIndex((item) => item.column === 'id')
  return order.slice(0, idAt + 1)
}

export interface Cursor {
  /** As sent, for the refusal of a position the listing does not reach (notACursor). */
  text: string
  position: number
  key: KeyValue[]
}

export function encodeCursor(sortText: string, position: number, key: KeyValue[]): string {
  return Buffer.from(JSON.stringify([sortText, position, ...key])).toString('base64url')
}

/** The 400 of an `after` that is not a cursor this listing made. */
export function notACursor(text: string): Error {
  return badRequest(`after '${text.length > 40 ? `${text.slice(0, 40)}...` : text}' is not a cursor of this listing; use the Next of a previous answer.`)
}

/**
 * Reads `after`; 400 for anything that is not a cursor this listing made for this sort.
 * (Its position is checked against the listing's Total when that is known: runListing.)
 */
export function decodeCursor(text: string, sortText: string, order: readonly OrderItem[]): Cursor {
  const invalid = () => notACursor(text)
  if (!/^[A-Za-z0-9_-]+$/.test(text)) throw invalid()
  let decoded: unknown
  try {
    decoded = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'))
  } catch {
    throw invalid()
  }
  if (!Array.isArray(decoded) || typeof decoded[0] !== 'string') throw invalid()
  const [sort, position, ...key] = decoded as unknown[]
  if (sort !== sortText) throw badRequest(`after was made for sort '${String(sort)}', not '${sortText}'; keep the sort while paging.`)
  const keyColumns = keyOrder(order)
  if (key.length !== keyColumns.length) throw invalid()
  if (!Number.isSafeInteger(position) || (position as number) < 1) throw invalid()
  keyColumns.forEach(({ column }, index) => {
    const value = key[index]
    if (value === null && column !== 'id') return
    const fits = integerColumns.has(column) ? Number.isSafeInteger(value) : typeof value === 'string' && value.length <= 1024
    if (!fits) throw invalid()
  })
  return { text, position: position as number, key: key as KeyValue[] }
}

/**
 * The condition "this row comes after `key`" in `order` (ascending NULLs first,
 * descending NULLs last, as both SQLite and MySQL sort): for each order column i,
 * the rows equal on the columns before it and after the key on column i.
 * The first column's bound is repeated on its own where it is a plain range, so the
 * database seeks to it in the order's index instead of filtering from the start.
 */
export function afterKey(order: readonly OrderItem[], key: readonly KeyValue[]) {
  return (eb: ExpressionBuilder<PeopleDatabase, 'people'>): Expression<SqlBool> => {
    const columns = keyOrder(order)
    const equal = (index: number) => {
      const { column } = columns[index]
      return key[index] === null ? eb(column, 'is', null) : eb(column, '=', key[index]!)
    }
    const alternatives: Expression<SqlBool>[] = []
    columns.forEach(({ column, direction }, index) => {
      const value = key[index]
      let beyond: Expression<SqlBool> | null
      if (direction === 'asc') beyond = value === null ? eb(column, 'is not', null) : eb(column, '>', value)
      else beyond = value === null ? null : eb.or([eb(column, '<', value), eb(column, 'is', null)])
      if (beyond === null) return // nothing sorts after NULL descending
      const before = columns.slice(0, index).map((_, earlier) => equal(earlier))
      alternatives.push(before.length === 0 ? beyond : eb.and([...before, beyond]))
    })
    const after = alternatives.length === 0 ? sql<SqlBool>`1 = 0` : eb.or(alternatives)
    const first = columns[0]
    const firstValue = key[0]
    if (first.direction === 'asc' && firstValue !== null) return eb.and([eb(first.column, '>=', firstValue), after])
    if (first.direction === 'desc' && firstValue === null) return eb.and([eb(first.column, 'is', null), after])
    if (first.direction === 'desc') return eb.and([eb.or([eb(first.column, '<=', firstValue), eb(first.column, 'is', null)]), after])
    return after
  }
}
