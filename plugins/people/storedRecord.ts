import { sql, type Dialect, type Kysely } from '../../kernel/sdk.ts'
import { personRecord, recordColumns, rememberingHttpDate, type RecordRow } from './fields.ts'
import { inScope, type PeopleDb, type Scope } from './scope.ts'

/**
 * Each person's record is rendered once, when the person is written, and stored as
 * JSON text (people.record_text, migration 0003), so a listing page reads one text per
 * person and sends it as it is: no row objects, no JSON.parse and no JSON.stringify of
 * 100 records on the request path (issue 19 goal 3; docs/benchmarks.md has the figures).
 *
 * The text is the record after its Id, `,"Emp_Id":...}`, because an imported person's
 * Id is not known until the row is inserted: `{"Id":<id>` + the text is the record.
 *
 * Every write of a person keeps it in step, in the write's own transaction: a
 * single-person write renders it again by id (`renderRecords`), an import renders what
 * it writes (`recordTextOf`), and a change of many rows at once sets it NULL and then
 * renders whatever is NULL (`renderStaleRecords`). A listing that meets a NULL renders
 * that person from the columns (listing.ts), so a row written by an older version is
 * slower, not wrong. test/people-stored-record.test.ts checks every write path.
 *
 * Kept on SQLite only. On MySQL/MariaDB the text made an import of 100,000 people
 * 1.5-2 s slower (the driver escapes every quote in it and the server parses it: goal 5's
 * 8 s was passed) while a page gained little (the server's own CPU, on the same cores,
 * bounds it), so there the column stays NULL and a page renders its people's columns.
 */

/** What the write paths call; on MySQL/MariaDB each does nothing (see above). */
export interface StoredRecords {
  readonly kept: boolean
  /** The text to store for a person about to be written (an import's rows), or null where none is kept. */
  textOf(row: Partial<RecordRow>, formatDate: (time: number) => string): string | null
  /** Renders these people's texts again from their columns: after a single-person write, in its transaction. */
  render(db: Kysely<any>, ids: readonly number[]): Promise<void>
  /**
   * Renders every text of `scope` (of everyone when null: migration 0003) that is NULL,
   * walking the primary key once in batches: a change of many rows at once sets their
   * texts NULL in its own statement, then calls this in the same transaction.
   */
  renderStale(db: Kysely<any>, scope: Scope | null): Promise<number>
}

const notKept: StoredRecords = {
  kept: false,
  textOf: () => null,
  render: async () => {},
  renderStale: async () => 0,
}

const kept: StoredRecords = { kept: true, textOf: recordTextOf, render: renderRecords, renderStale: renderStaleRecords }

export function storedRecords(dialect: Dialect): StoredRecords {
  return dialect === 'sqlite' ? kept : notKept
}

/**
 * The stored text of a person: its record as JSON after the Id. `row` may lack columns
 * (a new person's unset fields), which count as NULL; its Id is not used. `formatDate`:
 * one rememberingHttpDate per batch, whose rows share two or three times. (Rendered from
 * the row as it is: copying it into a full row first tripled an import's cost per person.)
 */
export function recordTextOf(row: Partial<RecordRow>, formatDate: (time: number) => string): string {
  const text = JSON.stringify(personRecord(row as RecordRow, formatDate))
  // `{"Id":<a number or null>,` : the first comma ends the Id.
  return text.slice(text.indexOf(','))
}

/** A listing's record from its stored text: the inverse of recordTextOf. */
export function recordJson(id: number, text: string): string {
  return `{"Id":${id}${text}`
}

/** Rows per statement when many people are rendered: 500 ids and texts bound, 1,500 values. */
const renderBatch = 500

/** Writes rendered texts, one statement per batch (a CASE on the id, so a batch is one round trip). */
async function storeTexts(db: Kysely<any>, rows: readonly RecordRow[], formatDate: (time: number) => string): Promise<void> {
  if (rows.length === 0) return
  if (rows.length === 1) {
    await (db as PeopleDb).updateTable('people').set({ record_text: recordTextOf(rows[0], formatDate) }).where('id', '=', Number(rows[0].id)).execute()
    return
  }
  const cases = rows.map((row) => sql`when ${Number(row.id)} then ${recordTextOf(row, formatDate)}`)
  const ids = rows.map((row) => Number(row.id))
  await sql`update people set record_text = case id ${sql.join(cases, sql` `)} end where id in (${sql.join(ids)})`.execute(db)
}

async function renderRecords(db: Kysely<any>, ids: readonly number[]): Promise<void> {
  const formatDate = rememberingHttpDate()
  for (let at = 0; at < ids.length; at += renderBatch) {
    const part = ids.slice(at, at + renderBatch)
    const rows = await (db as PeopleDb).selectFrom('people').select(recordColumns).where('id', 'in', part).execute()
    await storeTexts(db, rows, formatDate)
  }
}

async function renderStaleRecords(db: Kysely<any>, scope: Scope | null): Promise<number> {
  const formatDate = rememberingHttpDate()
  let after = 0
  let rendered = 0
  for (;;) {
    let query = (db as PeopleDb).selectFrom('people').select(recordColumns).where('id', '>', after).where('record_text', 'is', null)
    if (scope) query = query.where(inScope(scope))
    const rows = await query.orderBy('id').limit(renderBatch).execute()
    if (rows.length === 0) return rendered
    await storeTexts(db, rows, formatDate)
    rendered += rows.length
    after = Number(rows[rows.length - 1].id)
  }
}

/** The texts of people whose stored record is NULL, rendered from their columns for one answer (nothing written). */
export async function renderedTexts(db: PeopleDb, ids: readonly number[]): Promise<Map<number, string>> {
  const formatDate = rememberingHttpDate()
  const rows = await db.selectFrom('people').select(recordColumns).where('id', 'in', ids).execute()
  return new Map(rows.map((row) => [Number(row.id), recordTextOf(row, formatDate)]))
}
