import { badRequest, isUniqueViolation, notFound, retryOnDeadlock, retryWhen, schemaCheck, sql, type KernelServices } from '../../kernel/sdk.ts'
import { columnsFromInput, editableFields, personFieldProperties, recordColumns, rememberingHttpDate, type PersonColumns, type PersonInput, type RecordRow } from './fields.ts'
import { custnoFor } from './queries.ts'
import { rowsPerStatement, type BulkRow, type BulkWriter } from './bulkWrite.ts'
import { rowsFromCsv, type SentRow } from './csvRows.ts'
import { forgetStoredPhotos, replacedStoredPhoto } from './photos.ts'
import { inScope, type PeopleDb, type PeopleRoom, type Scope } from './scope.ts'
import type { StoredRecords } from './storedRecord.ts'

/**
 * Bulk import for HR systems (D13): importinit -> importmass (any number of batches)
 * -> importterm. Rows are matched on Source_Id inside their customer and upserted.
 *
 * A batch is checked row by row first; bad rows are rejected with their row number and
 * reason, and all good rows are then written in one transaction together with the
 * import's counters and rejections, so a batch is either written whole or not at all.
 */

export const maxBatchRows = 10_000
/** How many rejections importterm lists (all are counted); each batch answer lists all of its own. */
export const maxListedRejections = 1_000

// Import rows are checked by the plugin, not the route schema, so one bad row rejects
// that row instead of the whole batch. Compiled once, at load.
const checkRow = schemaCheck({ type: 'object', additionalProperties: false, properties: personFieldProperties })
const storableText = schemaCheck({ type: 'string' })

/**
 * A rejected row's Source_Id as answered and stored (people_import_rejections.source_id,
 * 100 characters): only text that keeps the text rule, cut to 100 code points.
 */
function rejectedSourceId(sourceId: unknown): string {
  if (typeof sourceId !== 'string' || storableText(sourceId) !== null) return ''
  return sourceId.length <= 100 ? sourceId : Array.from(sourceId).slice(0, 100).join('')
}

export interface Rejection {
  Row: number
  Source_Id: string
  Reason: string
}

export interface BatchAnswer {
  ImportId: number
  Batch: number
  Rows: number
  Added: number
  Changed: number
  Unchanged: number
  Rejected: number
  Rejections: Rejection[]
}

export interface ImportSummary {
  ImportId: number
  Batches: number
  Added: number
  Changed: number
  Unchanged: number
  Terminated: number
  Rejected: number
  Rejections: (Rejection & { Batch: number })[]
}

export async function startImport(db: PeopleDb, scope: Scope, keyId: number, now: number): Promise<{ ImportId: number }> {
  const inserted = await db.insertInto('people_imports')
    .values({ parent: scope.parent, custno: scope.custno, key_id: keyId, started: now })
    .executeTakeFirstOrThrow()
  return { ImportId: Number(inserted.insertId) }
}

/** An import belongs to the scope of the key that started it; only keys of that same scope continue it. */
async function openImport(db: PeopleDb, scope: Scope, importId: number) {
  const found = await db.selectFrom('people_imports').selectAll()
    .where('id', '=', importId).where('parent', '=', scope.parent).where('custno', '=', scope.custno)
    .executeTakeFirst()
  if (!found) throw notFound(`Import ${importId} not found.`)
  if (found.finished !== null) throw badRequest(`Import ${importId} is already finished.`)
  return found
}

/** A row that passed every check, ready to write. */
interface GoodRow {
  row: number
  custno: number
  sourceId: string
  columns: PersonColumns
}

/** Checks one row; answers the reason when it cannot be written. */
function checkSentRow(sent: SentRow, scope: Scope): GoodRow | string {
  if (sent.problem) return sent.problem
  if (sent.fields === null || typeof sent.fields !== 'object' || Array.isArray(sent.fields)) return 'The row is not an object.'
  const problem = checkRow(sent.fields)
  if (problem !== null) return problem
  const input = sent.fields as PersonInput
  const custno = custnoFor(scope, input.Custno)
  if (typeof custno === 'string') return custno
  const columns = columnsFromInput(input)
  if (typeof columns === 'string') return columns
  if (!columns.source_id) return 'Source_Id is required.'
  if (!columns.last_name) return 'LastName is required.'
  return { row: sent.row, custno, sourceId: columns.source_id, columns }
}

function chunks<T>(items: T[], size: number): T[][] {
  const result: T[][] = []
  for (let at = 0; at < items.length; at += size) result.push(items.slice(at, at + size))
  return result
}

/** Every column a new person is written with, so one multi-row insert fits all rows. */
export const newPersonColumns = ['parent', 'custno', 'created', 'date_edit', 'seen_import', 'has_photo', 'record_text', ...editableFields.map((field) => field.column)]

/**
 * Column values of a new person (absent fields NULL; Gender U and has_photo 0 unless
 * given), with its stored record where one is kept. `formatDate`: one rememberingHttpDate per batch.
 */
export function newPersonValues(columns: PersonColumns, custno: number, parent: number, importId: number, now: number, records: StoredRecords, formatDate: (time: number) => string): BulkRow {
  const values: BulkRow = { gender: 'U', has_photo: 0, ...columns, parent, custno, created: now, date_edit: now, seen_import: importId, record_text: null }
  values.record_text = records.textOf(values as Partial<RecordRow>, formatDate)
  return values
}

/**
 * Changed people grouped by the fields their rows gave (a missing CSV column or JSON
 * field leaves that field alone), so each group is written by one upsert per 1,000 rows.
 */
function changedByFields(rows: readonly GoodRow[]): Map<string, GoodRow[]> {
  const groups = new Map<string, GoodRow[]>()
  for (const row of rows) {
    const fields = Object.keys(row.columns).join(',')
    const group = groups.get(fields)
    if (group) group.push(row)
    else groups.set(fields, [row])
  }
  return groups
}

function differs(existing: RecordRow, columns: PersonColumns): boolean {
  for (const [column, value] of Object.entries(columns)) {
    if (!(column in existing)) continue // has_photo follows photo
    const stored = (existing as Record<string, unknown>)[column]
    if ((stored === null ? null : typeof value === 'number' ? Number(stored) : stored) !== value) return true
  }
  return false
}

/** A transaction of an import's writes: READ COMMITTED where `readCommitted` (MySQL), else the database's default. */
function importTransaction(db: PeopleDb, readCommitted: boolean) {
  return readCommitted ? db.transaction().setIsolationLevel('read committed') : db.transaction()
}

export interface BatchResult {
  answer: BatchAnswer
  /** The customers whose people were added or changed: their cached listings are stale. */
  touchedCustnos: number[]
  /** The people's own uploaded images their new Photo replaced (rows removed with the batch; files of versions before 0.3.2 the caller's). */
  replacedPhotos: string[]
}

export async function importBatch(
  db: PeopleDb,
  scope: Scope,
  batch: { ImportId: number; People?: unknown[]; Csv?: string },
  now: number,
  writes: { room: PeopleRoom; bulk: BulkWriter; readCommitted: boolean; records: StoredRecords },
): Promise<BatchResult> {
  if ((batch.People === undefined) === (batch.Csv === undefined)) throw badRequest('Send either People (a JSON array) or Csv (CSV text with a header line).')
  const importId = batch.ImportId
  await openImport(db, scope, importId)
  const sent: SentRow[] = batch.Csv !== undefined ? rowsFromCsv(batch.Csv, maxBatchRows) : batch.People!.map((fields, index) => ({ row: index + 1, fields }))
  if (sent.length > maxBatchRows) throw badRequest(`A batch holds at most ${maxBatchRows} rows; this one has ${sent.length}.`)

  const rejections: Rejection[] = []
  const good: GoodRow[] = []
  const firstRowOf = new Map<string, number>()
  for (const row of sent) {
    const checked = checkSentRow(row, scope)
    if (typeof checked === 'string') {
      const sourceId = (row.fields as { Source_Id?: unknown } | null)?.Source_Id
      rejections.push({ Row: row.row, Source_Id: rejectedSourceId(sourceId), Reason: checked })
      continue
    }
    const identity = `${checked.custno}\u0000${checked.sourceId}`
    const first = firstRowOf.get(identity)
    if (first !== undefined) {
      rejections.push({ Row: row.row, Source_Id: checked.sourceId, Reason: `Source_Id '${checked.sourceId}' repeats row ${first} of this batch.` })
      continue
    }
    firstRowOf.set(identity, row.row)
    good.push(checked)
  }

  try {
    // READ COMMITTED on MySQL: the MaxPeople count below must see people committed after
    // this transaction's first read (the room check's lock orders the writers).
    // Two batches (of two imports) inserting the same new Source_Ids in different orders can
    // deadlock on MySQL's unique index; the victim is neither the client's fault nor an
    // outage (it was answered 503): rolled back whole, it runs again and meets the rows the
    // other batch committed. So does a batch whose insert met a new person another batch
    // committed after this one read them (MySQL waits for that commit, then says duplicate):
    // the upsert the client asked for is then a change, not the client's mistake.
    return await retryWhen(() => retryOnDeadlock(() => importTransaction(db, writes.readCommitted).execute(async (trx) => {
      // Counting the batch first also locks the import's row (MySQL), so two batches of
      // one import take turns, and a batch racing importterm cannot land after it.
      const counted = await trx.updateTable('people_imports').set((eb) => ({ batches: eb('batches', '+', 1) }))
        .where('id', '=', importId).where('finished', 'is', null).executeTakeFirst()
      if (Number(counted.numUpdatedRows) !== 1) throw badRequest(`Import ${importId} is already finished.`)
      const { batches: batchNumber } = await trx.selectFrom('people_imports').select('batches').where('id', '=', importId).executeTakeFirstOrThrow()

      const existing = new Map<string, RecordRow>()
      for (const part of chunks(good, rowsPerStatement)) {
        const rows = await trx.selectFrom('people').select(recordColumns).where(inScope(scope))
          .where('source_id', 'in', part.map((row) => row.sourceId)).execute()
        for (const row of rows) existing.set(`${Number(row.custno)}\u0000${row.source_id}`, row)
      }

      // The whole batch is refused (403, nothing written) when its new people would pass MaxPeople.
      const newPerCustno = new Map<number, number>()
      for (const row of good) {
        if (!existing.has(`${row.custno}\u0000${row.sourceId}`)) newPerCustno.set(row.custno, (newPerCustno.get(row.custno) ?? 0) + 1)
      }
      await writes.room(trx, [...newPerCustno].map(([custno, count]) => ({ parent: scope.parent, custno, count })))

      const added: GoodRow[] = []
      const changedRows: GoodRow[] = []
      const unchangedIds: number[] = []
      const touched = new Set<number>()
      for (const row of good) {
        const stored = existing.get(`${row.custno}\u0000${row.sourceId}`)
        if (stored === undefined) {
          added.push(row)
          touched.add(row.custno)
        } else if (differs(stored, row.columns)) {
          changedRows.push(row)
          touched.add(row.custno)
        } else {
          unchangedIds.push(Number(stored.id))
        }
      }
      const changed = changedRows.length
      // Only rows whose Photo changes from an image we stored for that person (photos.ts).
      const replacedPhotos: string[] = []
      for (const row of changedRows) {
        const stored = existing.get(`${row.custno}\u0000${row.sourceId}`)!
        const replaced = replacedStoredPhoto(stored.photo, row.columns.photo, { parent: scope.parent, personId: Number(stored.id) })
        if (replaced !== null) replacedPhotos.push(replaced)
      }
      const formatDate = rememberingHttpDate()
      await writes.bulk.insert(trx, newPersonColumns, added.map((row) => newPersonValues(row.columns, row.custno, scope.parent, importId, now, writes.records, formatDate)))
      for (const [fields, rows] of changedByFields(changedRows)) {
        const given = fields.split(',').filter((column) => column !== 'source_id')
        await writes.bulk.upsert(trx, ['parent', 'custno', 'source_id', 'created', 'date_edit', 'seen_import', 'record_text', ...given], [...given, 'date_edit', 'record_text'],
          rows.map((row) => {
            // The stored record of the person as it will be: the row read above (not used
            // again) given this row's fields.
            const after = Object.assign(existing.get(`${row.custno}\u0000${row.sourceId}`)!, row.columns, { date_edit: now })
            return { ...row.columns, parent: scope.parent, custno: row.custno, created: now, date_edit: now, seen_import: importId, record_text: writes.records.textOf(after, formatDate) }
          }), ['seen_import'])
      }
      // Unchanged people keep their DateEdit; they are only marked as seen by this import,
      // unless a newer one (overlapping this) has seen them already: see finishImport.
      for (const part of chunks(unchangedIds, rowsPerStatement)) {
        await trx.updateTable('people').set({ seen_import: importId }).where('id', 'in', part)
          .where((eb) => eb.or([eb('seen_import', 'is', null), eb('seen_import', '<', importId)])).execute()
      }
      await forgetStoredPhotos(trx, replacedPhotos)
      for (const part of chunks(rejections, rowsPerStatement)) {
        await trx.insertInto('people_import_rejections').values(part.map((rejection) => ({
          import_id: importId, batch: Number(batchNumber), row_no: rejection.Row, source_id: rejection.Source_Id || null, reason: rejection.Reason.slice(0, 500),
        }))).execute()
      }
      await trx.updateTable('people_imports').set((eb) => ({
        added: eb('added', '+', added.length),
        changed: eb('changed', '+', changed),
        unchanged: eb('unchanged', '+', unchangedIds.length),
        rejected: eb('rejected', '+', rejections.length),
      })).where('id', '=', importId).execute()

      return {
        answer: {
          ImportId: importId, Batch: Number(batchNumber), Rows: sent.length,
          Added: added.length, Changed: changed, Unchanged: unchangedIds.length, Rejected: rejections.length, Rejections: rejections,
        },
        touchedCustnos: [...touched],
        replacedPhotos,
      }
    })), isUniqueViolation)
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw badRequest('Another import or change wrote one of these Source_Ids at the same moment; nothing of this batch was written, send it again.')
    }
    throw error
  }
}

export interface FinishResult {
  answer: ImportSummary
  touchedCustnos: number[]
}

/**
 * Ends an import: the scope's current people that no batch of it delivered are
 * terminated (TermDate = `today`, the tenant's date, unless they already have one), and the counts answered.
 * A person's seen_import is the newest import that delivered them (ids only grow), so
 * imports that overlap (two open at once, or a customer's and a parent-wide one) never
 * terminate each other's people: whoever import N or a newer one delivered stays. One
 * column, not a row per delivered person, keeps 100,000-people imports fast.
 * `people.import.finished` (issue 17) is emitted in the same transaction.
 */
export async function finishImport(db: PeopleDb, scope: Scope, importId: number, now: number, today: string, records: StoredRecords, events?: KernelServices['events'], readCommitted = false): Promise<FinishResult> {
  const started = await openImport(db, scope, importId)
  if (Number(started.added) + Number(started.changed) + Number(started.unchanged) === 0) {
    // An empty roster would terminate everyone; that is far more likely a broken export than the truth.
    throw badRequest(`Import ${importId} has received no people; refusing to terminate everyone in your scope.`)
  }
  // READ COMMITTED on MySQL: the lock below then waits only for the rows it matches.
  return retryOnDeadlock(() => importTransaction(db, readCommitted).execute(async (trx) => {
    // First lock the parent's open imports (a no-op update locks the rows it matches), as
    // every batch locks its own import's row first: a batch in flight finishes before the
    // terminating update below walks the people it writes, and one sent meanwhile waits.
    // Without it the two took people's locks in opposite orders, and MariaDB's deadlock
    // victim (this update, again on every rerun) was answered 503. SQLite has one writer.
    await trx.updateTable('people_imports').set((eb) => ({ batches: eb.ref('batches') }))
      .where('parent', '=', scope.parent).where('finished', 'is', null).execute()
    const finished = await trx.updateTable('people_imports').set({ finished: now })
      .where('id', '=', importId).where('finished', 'is', null).executeTakeFirst()
    if (Number(finished.numUpdatedRows) !== 1) throw badRequest(`Import ${importId} is already finished.`)
    // `+deleted` keeps SQLite off people_missing (parent, deleted, ...), whose rows come in
    // name order: 100,000 scattered row reads (150 ms) where people_sort_term_date reads
    // them in id order (35 ms). MySQL reads it as `deleted`.
    // Their stored records are made NULL here and rendered again below (storedRecord.ts).
    const terminated = await trx.updateTable('people').set({ term_date: today, date_edit: now, record_text: null })
      .where(inScope(scope)).where(sql<number>`+${sql.ref('deleted')}`, '=', 0).where('term_date', 'is', null)
      .where((eb) => eb.or([eb('seen_import', 'is', null), eb('seen_import', '<', importId)]))
      .executeTakeFirst()
    const count = Number(terminated.numUpdatedRows)
    if (count > 0) await records.renderStale(trx, scope)
    // Whose cached listings went stale: found only when someone was terminated (a roster
    // that still lists everyone is the usual case, and the search reads every person). The
    // people just terminated carry this very DateEdit and TermDate.
    const custnos = count === 0 ? [] : await trx.selectFrom('people').select('custno').distinct()
      .where(inScope(scope)).where('deleted', '=', 0).where('term_date', '=', today).where('date_edit', '=', now).execute()
    await trx.updateTable('people_imports').set({ terminated: count }).where('id', '=', importId).execute()
    const totals = await trx.selectFrom('people_imports').selectAll().where('id', '=', importId).executeTakeFirstOrThrow()
    const listed = await trx.selectFrom('people_import_rejections').select(['batch', 'row_no', 'source_id', 'reason'])
      .where('import_id', '=', importId).orderBy('batch').orderBy('row_no').limit(maxListedRejections).execute()
    const counts = {
      ImportId: importId, Batches: Number(totals.batches), Added: Number(totals.added), Changed: Number(totals.changed),
      Unchanged: Number(totals.unchanged), Terminated: count, Rejected: Number(totals.rejected),
    }
    // Whose import it was: a parent-wide webhook hears every customer's.
    await events?.emit(trx, { type: 'people.import.finished', parent: scope.parent, custno: scope.custno, data: { Parent: scope.parent, Custno: scope.custno, ...counts } })
    return {
      answer: {
        ...counts,
        Rejections: listed.map((rejection) => ({ Batch: Number(rejection.batch), Row: Number(rejection.row_no), Source_Id: rejection.source_id ?? '', Reason: rejection.reason })),
      },
      touchedCustnos: custnos.map((row) => Number(row.custno)),
    }
  }))
}
