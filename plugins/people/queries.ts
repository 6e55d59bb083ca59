import { badRequest, isUniqueViolation, notFound, type Addition } from '../../kernel/sdk.ts'
import { columnsFromInput, personRecord, recordColumns, type PersonColumns, type PersonInput, type PersonRecord, type RecordRow } from './fields.ts'
import { forgetStoredPhotos, replacedStoredPhoto } from './photos.ts'
import { inScope, type PeopleDb, type PeopleRoom, type Scope } from './scope.ts'
import type { StoredRecords } from './storedRecord.ts'

/**
 * The single-person operations (D13). Each answers the person as stored, read back
 * after the write, so the answer is exactly what a later listing shows. Each write
 * renders the person's stored record again in its own transaction (storedRecord.ts).
 */

/** The same answer for "no such Id" and "someone else's Id" (D6: never reveal another tenant's object). */
function personNotFound(id: number) {
  return notFound(`Person ${id} not found.`)
}

export async function findPerson(db: PeopleDb, scope: Scope, id: number): Promise<RecordRow> {
  const row = await db.selectFrom('people').select(recordColumns).where('id', '=', id).where(inScope(scope)).executeTakeFirst()
  if (!row) throw personNotFound(id)
  return row
}

/**
 * Writes `columns` (and DateEdit) over one person of the scope and renders its stored
 * record, in one transaction: a concurrent write to the same person waits for both, so
 * the text always matches the columns. When the write replaces the person's own uploaded
 * image, that image's row goes in the same transaction; its location is answered (a file
 * of a version before 0.3.2 is the caller's to remove). `db` may already be a transaction.
 */
async function updatePerson(db: PeopleDb, scope: Scope, before: RecordRow, columns: PersonColumns, now: number, records: StoredRecords): Promise<string | null> {
  const id = Number(before.id)
  const replaced = replacedStoredPhoto(before.photo, columns.photo, { parent: Number(before.parent), personId: id })
  const update = (trx: PeopleDb) => trx.updateTable('people').set({ ...columns, date_edit: now }).where('id', '=', id).where(inScope(scope)).execute()
  if (!records.kept && replaced === null) {
    await update(db)
    return null
  }
  const write = async (trx: PeopleDb) => {
    await update(trx)
    if (records.kept) await records.render(trx, [id])
    if (replaced !== null) await forgetStoredPhotos(trx, [replaced])
  }
  await (db.isTransaction ? write(db) : db.transaction().execute(write))
  return replaced
}

/** A write that makes a person count in a customer: the room check and the write in one transaction. */
async function updateWithRoom(db: PeopleDb, room: PeopleRoom, addition: Addition, scope: Scope, before: RecordRow, columns: PersonColumns, now: number, records: StoredRecords): Promise<string | null> {
  return db.transaction().execute(async (trx) => {
    await room(trx, [addition])
    return updatePerson(trx, scope, before, columns, now, records)
  })
}

/**
 * The Custno a new or moved person gets. A key bound to one customer can only use its
 * own; a parent-wide key (Custno 0) may name any customer of its parent (D9), default 0.
 */
export function custnoFor(scope: Scope, requested: number | undefined): number | string {
  if (requested === undefined) return scope.custno
  if (scope.custno !== 0 && requested !== scope.custno) return `Custno must be ${scope.custno} (your key's customer), got ${requested}.`
  return requested
}

function checkedColumns(input: PersonInput): PersonColumns {
  const columns = columnsFromInput(input)
  if (typeof columns === 'string') throw badRequest(columns)
  return columns
}

/** Writes, turning a taken Source_Id (as the write stores it) into a 400 that names it. */
async function writing<T>(sourceId: string | null | undefined, write: () => Promise<T>): Promise<T> {
  try {
    return await write()
  } catch (error) {
    if (isUniqueViolation(error)) throw badRequest(`Source_Id '${sourceId ?? ''}' is already used by another person of this customer.`)
    throw error
  }
}

export async function createPerson(db: PeopleDb, scope: Scope, input: PersonInput, now: number, room: PeopleRoom, records: StoredRecords): Promise<PersonRecord> {
  const custno = custnoFor(scope, input.Custno)
  if (typeof custno === 'string') throw badRequest(custno)
  const columns = checkedColumns(input)
  if (!columns.last_name) throw badRequest('LastName is required when creating a person.')
  const inserted = await writing(columns.source_id, () =>
    db.transaction().execute(async (trx) => {
      await room(trx, [{ parent: scope.parent, custno, count: 1 }])
      const written = await trx.insertInto('people').values({ ...columns, parent: scope.parent, custno, created: now, date_edit: now }).executeTakeFirstOrThrow()
      await records.render(trx, [Number(written.insertId)])
      return written
    }),
  )
  return personRecord(await findPerson(db, scope, Number(inserted.insertId)))
}

export interface ChangedPerson {
  before: RecordRow
  after: PersonRecord
  /** The person's own uploaded image the change replaced (its row is gone), or null. */
  replacedPhoto: string | null
}

/**
 * Changes only the given fields of a person in the scope; answers both versions (the
 * caller drops caches of each). A person moved to another customer counts there, so
 * that customer's MaxPeople must have room (D14), checked in the write's transaction.
 */
export async function changePerson(db: PeopleDb, scope: Scope, id: number, input: PersonInput, now: number, room: PeopleRoom, records: StoredRecords): Promise<ChangedPerson> {
  const before = await findPerson(db, scope, id)
  const columns = checkedColumns(input)
  if ('last_name' in columns && !columns.last_name) throw badRequest('LastName cannot be emptied.')
  if (input.Custno !== undefined) {
    const custno = custnoFor(scope, input.Custno)
    if (typeof custno === 'string') throw badRequest(custno)
    columns.custno = custno
  }
  const moves = columns.custno !== undefined && columns.custno !== Number(before.custno) && Number(before.deleted) === 0
  // A move keeps the Source_Id, which the target customer may hold already.
  const replacedPhoto = await writing(columns.source_id ?? before.source_id, () => moves
    ? updateWithRoom(db, room, { parent: Number(before.parent), custno: columns.custno!, count: 1, move: true }, scope, before, columns, now, records)
    : updatePerson(db, scope, before, columns, now, records))
  // Still in scope after a move: only a parent-wide key may change Custno, and it sees every Custno.
  return { before, after: personRecord(await findPerson(db, scope, id)), replacedPhoto }
}

/** Sets columns the server owns (Deleted, TermDate, Photo) on one person of the scope. */
export async function setPersonColumns(db: PeopleDb, scope: Scope, id: number, columns: PersonColumns, now: number, records: StoredRecords): Promise<ChangedPerson> {
  const before = await findPerson(db, scope, id)
  const replacedPhoto = await updatePerson(db, scope, before, columns, now, records)
  return { before, after: personRecord(await findPerson(db, scope, id)), replacedPhoto }
}

/** OneRecall: a deleted person counts again, so the tenant's MaxPeople must have room for it. */
export async function recallPerson(db: PeopleDb, scope: Scope, id: number, now: number, room: PeopleRoom, records: StoredRecords): Promise<ChangedPerson> {
  const before = await findPerson(db, scope, id)
  if (Number(before.deleted) === 0) return setPersonColumns(db, scope, id, { deleted: 0 }, now, records)
  await updateWithRoom(db, room, { parent: Number(before.parent), custno: Number(before.custno), count: 1 }, scope, before, { deleted: 0 }, now, records)
  return { before, after: personRecord(await findPerson(db, scope, id)), replacedPhoto: null }
}
