import { badRequest, JsonText, sql, type Dialect, type JsonPiece } from '../../kernel/sdk.ts'
import { personRecord, recordColumns, rememberingHttpDate, type PersonRecord, type RecordRow } from './fields.ts'
import { afterKey, decodeCursor, encodeCursor, keyOrder, notACursor, type Cursor, type KeyValue } from './cursor.ts'
import { inScope, type PeopleDb, type Scope } from './scope.ts'
import { recordJson, renderedTexts, storedRecords } from './storedRecord.ts'
import type { PeopleTable } from './tables.ts'
import type { ListingReads, ListingRow } from './pageStatements.ts'

/**
 * The people listings (D11): paging, sorting and filtering on allow-listed fields,
 * and the answer shape `{ Total, Page, Sort, Filter, Next, People }` shared by
 * GET /People/Read/Missing and POST /people/read/list|filtered|sorted.
 *
 * Every page is an index seek, never an OFFSET walk on the request path: a page asked
 * by cursor (`after`, cursor.ts) seeks after that key; a page asked by number seeks
 * after the key of the row just before it (its anchor), found once by OFFSET and then
 * remembered with the Total until the scope's people change.
 */

/** Listing parameters as they arrive (query string or JSON body); all optional. */
export interface ListingParameters {
  page?: number
  size?: number
  sort?: string
  filter?: string
  /** The Next of a previous answer: the page after that row (keyset paging; instead of page). */
  after?: string
  /** Only the list routes: 1/true also lists deleted people. */
  IncludeDeleted?: number | boolean
}

export const defaultPageSize = 100
export const maxPageSize = 1000
export const defaultSort = 'LastName,FirstName'
export const noPeopleFound = 'No people found'

/** JSON-schema properties of the listing parameters (no defaults: `planListing` applies them). */
export const listingProperties = {
  page: { type: 'integer', minimum: 1, maximum: 1000000 },
  size: { type: 'integer', minimum: 1, maximum: maxPageSize },
  sort: { type: 'string', maxLength: 500 },
  filter: { type: 'string', maxLength: 2000 },
  after: { type: 'string', minLength: 1, maxLength: 16384 },
} as const

type Column = keyof PeopleTable & string

/** Fields a listing may be sorted by, API name -> column. */
const sortableFields: Record<string, Column> = {
  Id: 'id', Emp_Id: 'emp_id', Created: 'created', Custno: 'custno', DispGroup: 'disp_group', Source_Id: 'source_id',
  Location: 'location', Email: 'email', FirstName: 'first_name', LastName: 'last_name', NickName: 'nick_name',
  Gender: 'gender', Dept: 'dept', Title: 'title', Birthday: 'birthday', HireDate: 'hire_date', TermDate: 'term_date',
  DateLast: 'date_last', DateEdit: 'date_edit',
}

/** Fields a listing may be filtered on (exact match), API name -> column and value type. */
const filterableFields: Record<string, { column: Column; type: 'text' | 'integer' }> = {
  Id: { column: 'id', type: 'integer' },
  Custno: { column: 'custno', type: 'integer' },
  Emp_Id: { column: 'emp_id', type: 'text' },
  DispGroup: { column: 'disp_group', type: 'text' },
  Source_Id: { column: 'source_id', type: 'text' },
  Location: { column: 'location', type: 'text' },
  Email: { column: 'email', type: 'text' },
  FirstName: { column: 'first_name', type: 'text' },
  LastName: { column: 'last_name', type: 'text' },
  NickName: { column: 'nick_name', type: 'text' },
  Gender: { column: 'gender', type: 'text' },
  Dept: { column: 'dept', type: 'text' },
  Title: { column: 'title', type: 'text' },
  HireDate: { column: 'hire_date', type: 'text' },
  TermDate: { column: 'term_date', type: 'text' },
  Deleted: { column: 'deleted', type: 'integer' },
}

// Field names are matched case-insensitively, like paths (D1); answers echo the canonical name.
const byLowerName = <T>(fields: Record<string, T>) =>
  new Map(Object.entries(fields).map(([name, value]) => [name.toLowerCase(), { name, value }]))
const sortableByLowerName = byLowerName(sortableFields)
/** The fields a listing may be sorted by (each has an index, migrations.ts 0002). */
export const sortableFieldNames = Object.keys(sortableFields)
const filterableByLowerName = byLowerName(filterableFields)

export interface ListingPlan {
  page: number
  /** Keyset paging: the row the page starts after (then `page` is not used). */
  after: Cursor | null
  size: number
  order: { column: Column; direction: 'asc' | 'desc' }[]
  conditions: { column: Column; value: string | number | null }[]
  /** The sort and filter as applied, echoed in the answer. */
  sortText: string
  filterText: string
}

function parseSort(text: string): Pick<ListingPlan, 'order' | 'sortText'> {
  const order: ListingPlan['order'] = []
  const names: string[] = []
  for (const part of text.split(',')) {
    const item = part.trim()
    if (item === '') continue
    const descending = item.startsWith('-')
    const bare = item.replace(/^[-+]/, '').trim()
    const field = sortableByLowerName.get(bare.toLowerCase())
    if (!field) throw badRequest(`Unknown sort field '${bare}'. Sortable fields: ${Object.keys(sortableFields).join(', ')}.`)
    if (names.some((name) => name.replace(/^-/, '') === field.name)) throw badRequest(`Sort field '${field.name}' is given more than once.`)
    names.push(descending ? `-${field.name}` : field.name)
    order.push({ column: field.value, direction: descending ? 'desc' : 'asc' })
  }
  if (order.length === 0) return parseSort(defaultSort)
  // Id last makes the order total, so pages neither repeat nor skip people. It runs the
  // way the last field does, so a one-field sort either way is one index read one way.
  if (!order.some((item) => item.column === 'id')) order.push({ column: 'id', direction: order[order.length - 1].direction })
  return { order, sortText: names.join(',') }
}

function parseFilter(text: string, allowDeleted: boolean): Pick<ListingPlan, 'conditions' | 'filterText'> {
  const conditions: ListingPlan['conditions'] = []
  const pairs: string[] = []
  for (const part of text.split(',')) {
    if (part.trim() === '') continue
    const at = part.indexOf('=')
    if (at === -1) throw badRequest(`Filter '${part.trim()}' must be Field=value.`)
    const name = part.slice(0, at).trim()
    const field = filterableByLowerName.get(name.toLowerCase())
    if (!field || (field.name === 'Deleted' && !allowDeleted)) {
      const allowed = Object.keys(filterableFields).filter((field) => allowDeleted || field !== 'Deleted')
      throw badRequest(`Unknown filter field '${name}'. Filterable fields: ${allowed.join(', ')}.`)
    }
    if (pairs.some((pair) => pair.startsWith(`${field.name}=`))) throw badRequest(`Filter field '${field.name}' is given more than once.`)
    const raw = part.slice(at + 1).trim()
    let value: string | number | null = raw === '' ? null : raw
    if (field.value.type === 'integer' && value !== null) {
      if (!/^\d{1,15}$/.test(raw)) throw badRequest(`Filter field '${field.name}' takes a whole number, got '${raw}'.`)
      value = Number(raw)
    }
    pairs.push(`${field.name}=${raw}`)
    conditions.push({ column: field.value.column, value })
  }
  return { conditions, filterText: pairs.join(',') }
}

/** Checks the parameters against the allow-lists and applies the defaults of D11; 400 naming any bad field. */
export function planListing(parameters: ListingParameters, options: { allowDeletedFilter: boolean }): ListingPlan {
  if (parameters.page !== undefined && parameters.after !== undefined) throw badRequest('Give either page or after, not both.')
  const sort = parseSort(parameters.sort ?? '')
  return {
    page: parameters.page ?? 1,
    after: parameters.after === undefined ? null : decodeCursor(parameters.after, sort.sortText, sort.order),
    size: parameters.size ?? defaultPageSize,
    ...sort,
    ...parseFilter(parameters.filter ?? '', options.allowDeletedFilter),
  }
}

export interface ListingAnswer {
  Total: number
  Page: string
  Sort: string
  Filter: string
  /** The cursor of this page's last row, for `after`; absent on the last page (so a one-page answer is D11's shape). */
  Next?: string
  People: PersonRecord[] | typeof noPeopleFound
}

/** Which people a listing ranges over before its filter. */
export type ListingSet = 'missing photo' | 'current' | 'current and deleted'

/** Keeps a listing's Total and page anchors between calls (the kernel's partitioned memo); `name` says which. */
export type ListingMemo = <T>(name: string, compute: () => Promise<T>) => Promise<T>

/**
 * The queries a listing runs, built from the plan; PageStatements (pageStatements.ts)
 * builds them once per listing shape and runs them with each call's values (exported so
 * a test can EXPLAIN exactly what the routes run). Where people's records are stored as text
 * (SQLite, storedRecord.ts) a page reads one text a person, else their columns.
 */
export function listingQueries(db: PeopleDb, dialect: Dialect, scope: Scope, set: ListingSet, plan: ListingPlan) {
  let query = db.selectFrom('people').where(inScope(scope))
  if (set !== 'current and deleted') query = query.where('deleted', '=', 0)
  if (set === 'missing photo') query = query.where('has_photo', '=', 0)
  for (const condition of plan.conditions) {
    query = condition.value === null ? query.where(condition.column, 'is', null) : query.where(condition.column, '=', condition.value)
  }
  const keyColumns = keyOrder(plan.order).map((item) => item.column)
  const inOrder = <Q extends { orderBy: (column: Column, direction: 'asc' | 'desc') => Q }>(ordered: Q) =>
    plan.order.reduce((sorted, { column, direction }) => sorted.orderBy(column, direction), ordered)
  const seek = (key: readonly KeyValue[] | null) => inOrder(key === null ? query : query.where(afterKey(plan.order, key)))
  const pageAfter = (key: readonly KeyValue[] | null) => seek(key).limit(plan.size + 1)
  return {
    count: query.select((eb) => eb.fn.countAll().as('total')),
    /** The key of the row after `offset` rows: the anchor the page after it seeks from. */
    keyAt: (offset: number) => inOrder(query.select(keyColumns)).limit(1).offset(offset),
    /** Whether a page is read as stored texts (`pageTexts`, SQLite) or as record columns (`pageColumns`). */
    readsTexts: storedRecords(dialect).kept,
    /**
     * The page after `key` (from the start when null), one row more than the page to tell
     * whether another follows: each person's Id and stored record, or record columns.
     */
    pageTexts: (key: readonly KeyValue[] | null) => pageAfter(key).select(['id', 'record_text']),
    pageColumns: (key: readonly KeyValue[] | null) => pageAfter(key).select(recordColumns),
    /**
     * Stored texts only (SQLite): the page after `key` as one statement, so both parts
     * read one snapshot. Its first row is the page's records joined by SQLite into the
     * text inside the People array (one value instead of 101 row objects, texts and a
     * join in JavaScript: about a fifth less CPU a page under load, 2026-11-29), with
     * how many people it lists and how many of them had a stored text; then the keys of
     * the page's last row and of the one after it, if there are any (two rows: another
     * page follows). group_concat joins in the order the page's subquery yields its rows
     * (SQLite does not flatten a subquery with a LIMIT into an aggregate); the tests
     * compare every page with the people sorted in memory. The joined text comes as a
     * BLOB, its UTF-8 bytes, which the answer sends as they are between its head and
     * tail (JsonText pieces, bodyPieces.ts): as a string it was decoded into a 45-90 KB
     * JavaScript string and encoded again into the answer's buffer, about 20 µs a page
     * under load (docs/benchmarks.md, thirty-fourth session). (Joined into one buffer
     * with the head, it cost as much as the string: a second 45 KB buffer a call, and
     * the full collections that external memory set off widened the p99.)
     * Its LIMITs and OFFSET are written as numbers: a bound one would be planned again
     * on every run (sqliteLiteralLimit.ts, which rewrites only the outer query's).
     */
    pageBody: (key: readonly KeyValue[] | null) => {
      const records = db.selectFrom(seek(key).select(['id', 'record_text']).limit(sql.lit(plan.size)).as('page')).select([
        sql<Uint8Array | null>`cast(group_concat('{"Id":' || "id" || "record_text", ',') as blob)`.as('body'),
        (eb) => eb.fn.countAll<number>().as('listed'),
        (eb) => eb.fn.count<number>('record_text').as('stored'),
        ...keyColumns.map((column) => sql<KeyValue>`null`.as(column)),
      ])
      const ends = db.selectFrom(seek(key).select(keyColumns).limit(sql.lit(2)).offset(sql.lit(plan.size - 1)).as('ends'))
        .select([sql<null>`null`.as('body'), sql<null>`null`.as('listed'), sql<null>`null`.as('stored'), ...keyColumns] as any)
      return records.unionAll(ends as any)
    },
    /**
     * The sort key of one person of a page read as texts row by row (its last, for Next;
     * only when some of its people had no stored text): read by Id, because reading the
     * key columns of all 101 rows cost SQLite more than this lookup.
     */
    keyOfPerson: (id: number) => db.selectFrom('people').select(keyColumns).where('id', '=', id),
    keyOf: (row: Partial<Record<Column, unknown>>): KeyValue[] => keyColumns.map((column) => row[column] as KeyValue),
  }
}

/**
 * A listing as answered: its body as JSON text, the records in it as stored, so a json
 * answer is sent without building or stringifying them; and what the CSV headers carry.
 */
export interface ListedPage {
  Total: number
  Page: string
  Next?: string
  body: JsonText
}

export async function runListing(db: PeopleDb, queries: ListingReads, set: ListingSet, plan: ListingPlan, remember: ListingMemo): Promise<ListedPage> {
  const listing = `${set}|${plan.filterText}`
  // Every page of one listing has the same Total; counting 100,000 rows costs more
  // than the page itself, so it is counted once until the scope's people change.
  let total = await remember(`total|${listing}`, () => queries.count())
  let pages = Math.max(1, Math.ceil(total / plan.size))
  // `people`: the JSON of the People field, a text or the records' array, in pieces.
  const answer = (page: string, next: string | null, people: readonly JsonPiece[]): ListedPage => {
    const head: Omit<ListingAnswer, 'People'> = next === null
      ? { Total: total, Page: page, Sort: plan.sortText, Filter: plan.filterText }
      : { Total: total, Page: page, Sort: plan.sortText, Filter: plan.filterText, Next: next }
    const body = new JsonText([`${JSON.stringify(head).slice(0, -1)},"People":`, ...people, '}'])
    return next === null ? { Total: total, Page: page, body } : { Total: total, Page: page, Next: next, body }
  }
  const nobody = [JSON.stringify(noPeopleFound)]

  // D11: when nothing matches, Page is 1 of 1 whichever page or cursor was asked for.
  if (total === 0) return answer('1 of 1', null, nobody)
  let before: number
  let key: KeyValue[] | null
  if (plan.after) {
    // A cursor is made for a row with more after it, so its position is below the Total it
    // was made with; one past the Total is hand-made (or kept while more people were removed
    // than it has left behind), and its Page and Next would count on from a row that is not there.
    if (plan.after.position > total) throw notACursor(plan.after.text)
    ;({ position: before, key } = plan.after)
  } else {
    // A page past the end is answered like "nothing matches", but keeps the real Total and its page number.
    if (plan.page > pages) return answer(`${plan.page} of ${pages}`, null, nobody)
    before = (plan.page - 1) * plan.size
    key = before === 0 ? null : await remember(`anchor|${listing}|${plan.sortText}|${before}`, () => queries.keyAt(before - 1))
  }
  if (before > 0 && key === null) return answer(`${Math.floor(before / plan.size) + 1} of ${pages}`, null, nobody)
  const read = await readPage(db, queries, key, plan.size)
  const end = before + read.count
  // A remembered Total predates a write that is committed but has not yet dropped it (a
  // write commits a moment before its drop): when the page shows that (people after the
  // Total, or a last page ending before it), count again, so one answer never pairs
  // the Total of before a write with people of after it. The drop follows at once.
  const { lastKey } = read
  if (read.count > 0 && (lastKey !== null ? end >= total : end !== total)) {
    total = await queries.count()
    pages = Math.max(1, Math.ceil(total / plan.size))
  }
  const page = `${Math.floor(before / plan.size) + 1} of ${pages}`
  if (read.count === 0) return answer(page, null, nobody)
  let next: string | null = null
  if (lastKey !== null) {
    next = encodeCursor(plan.sortText, end, lastKey)
    // The next page by number seeks from here too (only a numbered page knows its position exactly).
    if (!plan.after) await remember(`anchor|${listing}|${plan.sortText}|${end}`, async () => lastKey)
  }
  return answer(page, next, read.people)
}

/**
 * A page as read: its people's records as one JSON array (in pieces: SQLite's joined
 * records, as bytes, are not copied into another buffer), how many, and its last
 * person's key when more people follow (null on the last page).
 */
interface ReadPage {
  people: readonly JsonPiece[]
  count: number
  lastKey: KeyValue[] | null
}

/** Reads one page of at most `size` people (the query reads one more, to tell whether another page follows). */
async function readPage(db: PeopleDb, queries: ListingReads, key: readonly KeyValue[] | null, size: number): Promise<ReadPage> {
  if (queries.readsTexts) {
    const [records, ...ends] = await queries.pageBody(key) as [{ body: Uint8Array | null; listed: number; stored: number }, ...ListingRow[]]
    // Every person of the page had a stored text: the page is SQLite's text. Else it is
    // read again below, row by row, to render those without one.
    if (records.stored === records.listed) {
      return { people: ['[', records.body ?? '', ']'], count: Number(records.listed), lastKey: ends.length === 2 ? queries.keyOf(ends[0]) : null }
    }
    const rows = await queries.page(key) as { id: number; record_text: string | null }[]
    const more = rows.length > size
    if (more) rows.pop()
    // A person not rendered yet (none, unless written by an older version) is rendered from its columns.
    const stale = rows.filter((row) => row.record_text === null).map((row) => Number(row.id))
    const rendered = stale.length === 0 ? null : await renderedTexts(db, stale)
    // (One gone since the page was read, which only SQL could do, is left out rather than answered broken.)
    const texts = rows.flatMap((row) => {
      const text = row.record_text ?? rendered?.get(Number(row.id))
      return text === undefined ? [] : [recordJson(Number(row.id), text)]
    })
    return { people: [`[${texts.join(',')}]`], count: texts.length, lastKey: more && texts.length > 0 ? await queries.keyOfPerson(Number(rows[rows.length - 1].id)) : null }
  }
  const rows = await queries.page(key) as RecordRow[]
  const more = rows.length > size
  if (more) rows.pop()
  const formatDate = rememberingHttpDate()
  // One stringify of the page, not one per person and a join: the same text, about a
  // quarter less time for that step on a page of 100 (measured alone, 2026-11-28).
  const people = JSON.stringify(rows.map((row) => personRecord(row, formatDate)))
  return { people: [people], count: rows.length, lastKey: more ? queries.keyOf(rows[rows.length - 1]) : null }
}

/** The records of a listing answer, for CSV (one row per person; Total and Page go in headers, D12). */
export function listingRows(answer: ListingAnswer): PersonRecord[] {
  return Array.isArray(answer.People) ? answer.People : []
}
