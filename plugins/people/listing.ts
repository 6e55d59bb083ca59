import { badRequest } from '../../kernel/sdk.ts'
import { personRecord, recordColumns, type PersonRecord } from './fields.ts'
import { inScope, type PeopleDb, type Scope } from './scope.ts'
import type { PeopleTable } from './tables.ts'

/**
 * The people listings (D11): paging, sorting and filtering on allow-listed fields,
 * and the answer shape `{ Total, Page, Sort, Filter, People }` shared by
 * GET /People/Read/Missing and POST /people/read/list|filtered|sorted.
 */

/** Listing parameters as they arrive (query string or JSON body); all optional. */
export interface ListingParameters {
  page?: number
  size?: number
  sort?: string
  filter?: string
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
const filterableByLowerName = byLowerName(filterableFields)

export interface ListingPlan {
  page: number
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
  // Id last makes the order total, so pages neither repeat nor skip people.
  if (!order.some((item) => item.column === 'id')) order.push({ column: 'id', direction: 'asc' })
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
  return {
    page: parameters.page ?? 1,
    size: parameters.size ?? defaultPageSize,
    ...parseSort(parameters.sort ?? ''),
    ...parseFilter(parameters.filter ?? '', options.allowDeletedFilter),
  }
}

export interface ListingAnswer {
  Total: number
  Page: string
  Sort: string
  Filter: string
  People: PersonRecord[] | typeof noPeopleFound
}

/** Which people a listing ranges over before its filter. */
export type ListingSet = 'missing photo' | 'current' | 'current and deleted'

/** Keeps a listing's Total between calls (the kernel's partitioned memo); `name` says which listing. */
export type TotalMemo = (name: string, count: () => Promise<number>) => Promise<number>

export async function runListing(db: PeopleDb, scope: Scope, set: ListingSet, plan: ListingPlan, rememberTotal: TotalMemo): Promise<ListingAnswer> {
  let query = db.selectFrom('people').where(inScope(scope))
  if (set !== 'current and deleted') query = query.where('deleted', '=', 0)
  if (set === 'missing photo') query = query.where('has_photo', '=', 0)
  for (const condition of plan.conditions) {
    query = condition.value === null ? query.where(condition.column, 'is', null) : query.where(condition.column, '=', condition.value)
  }
  // Every page of one listing has the same Total; counting 100,000 rows costs more
  // than the page itself, so it is counted once until the scope's people change.
  const total = await rememberTotal(`${set}|${plan.filterText}`, async () => {
    const counted = await query.select((eb) => eb.fn.countAll().as('total')).executeTakeFirstOrThrow()
    return Number(counted.total)
  })
  const pages = Math.max(1, Math.ceil(total / plan.size))
  const answer = { Total: total, Page: `${plan.page} of ${pages}`, Sort: plan.sortText, Filter: plan.filterText }
  // A page past the end is answered like "nothing matches", but keeps the real Total.
  if (total === 0 || plan.page > pages) return { ...answer, People: noPeopleFound }

  let pageQuery = query.select(recordColumns)
  for (const { column, direction } of plan.order) pageQuery = pageQuery.orderBy(column, direction)
  const rows = await pageQuery.limit(plan.size).offset((plan.page - 1) * plan.size).execute()
  return { ...answer, People: rows.map(personRecord) }
}

/** The records of a listing answer, for CSV (one row per person; Total and Page go in headers, D12). */
export function listingRows(answer: ListingAnswer): PersonRecord[] {
  return Array.isArray(answer.People) ? answer.People : []
}
