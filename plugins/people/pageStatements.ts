import { LRUCache } from 'lru-cache'
import type { CompiledQuery, Dialect } from '../../kernel/sdk.ts'
import { listingQueries, type ListingPlan, type ListingSet } from './listing.ts'
import { keyOrder, type KeyValue } from './cursor.ts'
import { storedRecords } from './storedRecord.ts'
import type { PeopleDb, Scope } from './scope.ts'

/**
 * A listing's statements compiled once per shape, then run with each call's values.
 *
 * Building a listing's queries with Kysely and compiling them cost about 40-60 µs of
 * every uncached page (issue 19, goal 3), yet the SQL depends only on the listing's
 * shape: its set, whether the scope names a customer, the size, the sort, which filter
 * fields are given and which of them are empty (IS NULL), and which values of a page's
 * key are NULL. So a shape's statements are built once by the very builder that
 * test/people-explain.test.ts EXPLAINs (listingQueries), with a Slot in the place of
 * each value, and a call fills the slots with its own values.
 */

/** The values one call fills a statement's slots with. */
interface CallValues {
  scope: Scope
  plan: ListingPlan
  key: readonly KeyValue[] | null
  /** keyAt: rows before the anchor. */
  offset: number
  /** keyOfPerson: the person's Id. */
  id: number
}

/** A value a shape's statement is built with in place of a call's own; it says where the call's value is. */
class Slot {
  constructor(readonly take: (values: CallValues) => unknown) {}
}

/** A compiled statement and, per parameter, how a call's value for it is found. */
interface Statement {
  compiled: CompiledQuery
  takes: ((values: CallValues) => unknown)[]
}

export type ListingRow = Record<string, unknown>

/** What runListing reads, one call's values bound in (the same reads as listingQueries'). */
export interface ListingReads {
  /** Whether a page is read as stored texts (`id`, `record_text`; SQLite) or as record columns. */
  readsTexts: boolean
  count(): Promise<number>
  /** The key of the row after `offset` rows: the anchor the page after it seeks from. */
  keyAt(offset: number): Promise<KeyValue[] | null>
  /** The page after `key` (from the start when null), one row more than the page. */
  page(key: readonly KeyValue[] | null): Promise<ListingRow[]>
  /**
   * Stored texts only: the page after `key` as its records' joined text with how many
   * people and stored texts, then the keys of its last row and the row after it
   * (listingQueries' pageBody).
   */
  pageBody(key: readonly KeyValue[] | null): Promise<ListingRow[]>
  /** The sort key of one person, by Id. */
  keyOfPerson(id: number): Promise<KeyValue[]>
  keyOf(row: ListingRow): KeyValue[]
}

/**
 * How many compiled statements are kept. A shape has a few (the count, an anchor, a
 * person's key, and a page per pattern of NULLs in its key, which a hand-made cursor
 * chooses), so the bound is on statements, not shapes.
 */
const maxStatements = 2000

export class PageStatements {
  private readonly statements = new LRUCache<string, Statement>({ max: maxStatements })
  private readonly readsTexts: boolean

  constructor(
    private readonly db: PeopleDb,
    private readonly dialect: Dialect,
  ) {
    this.readsTexts = storedRecords(dialect).kept
  }

  /** The reads of one listing call. */
  reads(scope: Scope, set: ListingSet, plan: ListingPlan): ListingReads {
    const shapeKey = `${set}|${scope.custno === 0 ? 'parent' : 'customer'}|${plan.size}|${plan.sortText}|${plan.conditions.map(({ column, value }) => `${column}${value === null ? ' is null' : '=?'}`).join(',')}`
    const statements = this.statements
    const template = () => this.template(scope, set, plan)
    const readsTexts = this.readsTexts
    const keyColumns = keyOrder(plan.order).map((item) => item.column)
    const keyOf = (row: ListingRow): KeyValue[] => keyColumns.map((column) => row[column] as KeyValue)
    const run = async (name: string, build: (queries: ReturnType<typeof listingQueries>) => { compile(): CompiledQuery }, values: CallValues): Promise<ListingRow[]> => {
      let statement = statements.get(`${shapeKey}|${name}`)
      if (statement === undefined) {
        statement = compileOnce(build(template()))
        statements.set(`${shapeKey}|${name}`, statement)
      }
      const parameters = statement.takes.map((take) => take(values))
      const result = await this.db.executeQuery<ListingRow>({ ...statement.compiled, parameters })
      return result.rows
    }
    const values = (key: readonly KeyValue[] | null, offset = 0, id = 0): CallValues => ({ scope, plan, key, offset, id })
    // A page's key: which of its values are NULL is part of the statement (IS NULL, and fewer alternatives).
    const keyShape = (key: readonly KeyValue[] | null) => key === null ? 'first' : key.map((value) => value === null ? 'n' : 'v').join('')
    const slotKey = (key: readonly KeyValue[]) => key.map((value, index) => value === null ? null : new Slot((call) => call.key![index])) as KeyValue[]
    return {
      readsTexts,
      async count() {
        const rows = await run('count', (queries) => queries.count, values(null))
        return Number(rows[0].total)
      },
      async keyAt(offset) {
        const rows = await run('keyAt', (queries) => queries.keyAt(new Slot((call) => call.offset) as unknown as number), values(null, offset))
        return rows.length === 0 ? null : keyOf(rows[0])
      },
      page(key) {
        return run(`page|${keyShape(key)}`, (queries) => {
          const templateKey = key === null ? null : slotKey(key)
          return readsTexts ? queries.pageTexts(templateKey) : queries.pageColumns(templateKey)
        }, values(key))
      },
      pageBody(key) {
        return run(`body|${keyShape(key)}`, (queries) => queries.pageBody(key === null ? null : slotKey(key)), values(key))
      },
      async keyOfPerson(id) {
        const rows = await run('keyOfPerson', (queries) => queries.keyOfPerson(new Slot((call) => call.id) as unknown as number), values(null, 0, id))
        if (rows.length === 0) throw new Error(`Person ${id} is gone.`)
        return keyOf(rows[0])
      },
      keyOf,
    }
  }

  /** The listing's queries built with slots in the place of the call's values. */
  private template(scope: Scope, set: ListingSet, plan: ListingPlan): ReturnType<typeof listingQueries> {
    const slotScope = {
      parent: new Slot((call) => call.scope.parent),
      custno: scope.custno === 0 ? 0 : new Slot((call) => call.scope.custno),
    } as unknown as Scope
    const slotPlan: ListingPlan = {
      ...plan,
      conditions: plan.conditions.map(({ column, value }, index) => ({
        column,
        value: value === null ? null : new Slot((call) => call.plan.conditions[index].value) as unknown as number,
      })),
    }
    return listingQueries(this.db, this.dialect, slotScope, set, slotPlan)
  }
}

/** Compiles a statement built with slots; each parameter is either a slot (a call's value) or the builder's own constant. */
function compileOnce(query: { compile(): CompiledQuery }): Statement {
  const compiled = query.compile()
  const takes = compiled.parameters.map((parameter) => {
    if (parameter instanceof Slot) return parameter.take
    // A slot is never anything but a bound parameter; a constant (deleted = 0, MySQL's LIMIT) stays.
    return () => parameter
  })
  if (compiled.sql.includes('[object Object]')) throw new Error('A listing statement wrote a slot into its SQL text.')
  return { compiled, takes }
}
