import { recordListSchema, recordSchema } from '../../kernel/sdk.ts'
import { personFieldProperties, personRecordFields } from './fields.ts'
import { listingProperties, noPeopleFound } from './listing.ts'
import { maxBatchRows, maxListedRejections } from './import.ts'

/**
 * JSON schemas of the routes' query strings and bodies (their answers' at the end). The kernel compiles each once
 * at start and answers 400 naming the field for anything that does not fit, so the
 * handlers only ever see well-formed input. (Import rows are the exception: they are
 * checked one by one in import.ts, so one bad row does not reject its batch.)
 */

const id = { type: 'integer', minimum: 1, maximum: 9007199254740991 } as const

/** GET /People/Read/Missing?page=&size=&sort=&filter= (D11). */
export const missingQuery = {
  type: 'object',
  additionalProperties: false,
  properties: listingProperties,
} as const

/** POST /people/read/list|filtered|sorted: the same parameters in the body, and IncludeDeleted. */
export const listBody = {
  type: 'object',
  additionalProperties: false,
  properties: { ...listingProperties, IncludeDeleted: { enum: [0, 1, true, false] } },
} as const

/** The list routes also take D11's parameters in the query string. */
export const listQuery = missingQuery

/**
 * GET /people/read/list|filtered|sorted (D11 names /people/read/list among the routes that
 * take query parameters): everything in the query string, IncludeDeleted as 0/1 or true/false.
 */
export const listGetQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { ...listingProperties, IncludeDeleted: { type: ['integer', 'boolean'], enum: [0, 1, true, false] } },
} as const

/** POST /People/Update/OneChange: no Id creates, an Id changes only the given fields. */
export const changeBody = {
  type: 'object',
  additionalProperties: false,
  properties: { Id: id, ...personFieldProperties },
} as const

/** POST /People/Update/OnePhoto: `{ Id, Photo }` or `{ Id, Image, Type? }` (the handler insists on exactly one). */
export const photoBody = {
  type: 'object',
  additionalProperties: false,
  required: ['Id'],
  properties: {
    Id: id,
    Photo: { type: ['string', 'null'], maxLength: 1024 },
    // The size limit is checked on the decoded bytes (photos.ts), with a clearer message.
    Image: { type: 'string' },
    Type: { type: 'string', maxLength: 40 },
  },
} as const

/** POST /People/Update/OneRemove and /OneRecall. */
export const idBody = {
  type: 'object',
  additionalProperties: false,
  required: ['Id'],
  properties: { Id: id },
} as const

/** POST /People/Update/OneTerminate: TermDate defaults to today in the tenant's time zone (left out or null); "" is refused. */
export const terminateBody = {
  type: 'object',
  additionalProperties: false,
  required: ['Id'],
  // null, as a client that writes every field sends an absent one, means today too.
  properties: { Id: id, TermDate: { type: ['string', 'null'], maxLength: 40 } },
} as const

/** POST /people/update/importinit takes nothing (an empty object at most). */
export const importInitBody = { type: 'object', additionalProperties: false, properties: {} } as const

/**
 * POST /people/update/importmass: People (JSON array) or Csv (text with a header line).
 * Their rows are checked one by one (import.ts checkRow, the text rule included), so a
 * row with a control character is rejected alone, like any other bad row.
 */
export const importMassBody = {
  type: 'object',
  additionalProperties: false,
  'x-keygate-rows': ['People', 'Csv'],
  required: ['ImportId'],
  properties: {
    ImportId: id,
    People: { type: 'array', maxItems: maxBatchRows },
    Csv: { type: 'string' },
  },
} as const

/** POST /people/update/importterm. */
export const importTermBody = {
  type: 'object',
  additionalProperties: false,
  required: ['ImportId'],
  properties: { ImportId: id },
} as const

/** GET /People/Read/Today?dispgroup=G (D14). */
export const todayQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { dispgroup: { type: 'string', minLength: 1, maxLength: 100 } },
} as const

/**
 * GET /People/Read/Photo?Id=N (D14). Parameter names are case-sensitive: `?id=10` must
 * answer that `id` is not a known parameter, not that Id is missing. The validator checks
 * `required` before `additionalProperties` at one level, but `allOf` before both, so the
 * unknown-name check is repeated there to come first.
 */
export const photoQuery = {
  type: 'object',
  additionalProperties: false,
  required: ['Id'],
  properties: { Id: id },
  allOf: [{ additionalProperties: false, properties: { Id: {} } }],
} as const

/*
 * JSON schemas of the answers (Route.answer): what the OpenAPI document shows a client
 * gets, built from fields.ts (personRecord), listing.ts, today.ts and import.ts.
 * test/openapi-answers.test.ts holds them to the real answers.
 */

const integer = { type: 'integer' }
const text = { type: 'string' }

/** Fields of the person record that are not plain text ("" when empty). */
const recordFieldSchemas: Record<string, object> = {
  Id: integer,
  Created: { type: 'string', description: 'An HTTP-date (D9).' },
  Deleted: { type: 'integer', description: '1: deleted (OneRemove); listed only when asked for.' },
  Parent: integer,
  Custno: integer,
  Gender: { type: 'string', description: 'M, F or U.' },
  Birthday: { type: 'string', description: 'YYYY-MM-DD, perhaps with an invalid year (0000); "" when not set.' },
  HireDate: { type: 'string', description: 'YYYY-MM-DD; "" when not set.' },
  TermDate: { type: 'string', description: 'YYYY-MM-DD; "" when not set.' },
  DateLast: { type: 'string', description: 'An HTTP-date; "" when not set.' },
  DateEdit: { type: 'string', description: 'An HTTP-date: the last change.' },
}

/** The person record of interface 2.4, in its field order: every field always there, text fields "" when empty. */
const personProperties = Object.fromEntries(personRecordFields.map((name) => [name, recordFieldSchemas[name] ?? text]))

/** The answer of every single-person write. */
export const personAnswer = recordSchema(personProperties)

const listingFields = {
  Total: integer,
  Page: { type: 'string', description: '"<page> of <pages>".' },
  Sort: { type: 'string', description: 'The sort as applied.' },
  Filter: { type: 'string', description: 'The filter as applied.' },
  People: {
    anyOf: [{ type: 'array', items: personAnswer }, { type: 'string', const: noPeopleFound }],
    description: `The page's people, or "${noPeopleFound}".`,
  },
}

/** GET /People/Read/Missing and POST /people/read/list|filtered|sorted (D11); Next only where a page follows. */
export const listingAnswer = {
  ...recordSchema(listingFields),
  properties: { ...listingFields, Next: { type: 'string', description: 'The cursor of the next page (its `after`); left out on the last page.' } },
}

/** GET /People/Read/Today: birthdays first, then anniversaries, each by name. */
export const todayAnswer = recordListSchema({
  ...personProperties,
  Occasion: { type: 'string', enum: ['Birthday', 'Anniversary'] },
  Years: { type: ['integer', 'null'], description: 'Full years since HireDate for an anniversary; null for a birthday.' },
})

/** POST /people/update/importinit. */
export const importStartAnswer = recordSchema({ ImportId: integer })

const rejection = { Row: { type: 'integer', description: 'The row\'s number in the batch, from 1.' }, Source_Id: text, Reason: text }
const importCounts = { ImportId: integer, Added: integer, Changed: integer, Unchanged: integer, Rejected: integer }

/** POST /people/update/importmass: what one batch did, every rejected row listed. */
export const importBatchAnswer = recordSchema({ ...importCounts, Batch: integer, Rows: integer, Rejections: recordListSchema(rejection) })

/** POST /people/update/importterm: the whole import's counts, the first rejections listed. */
export const importSummaryAnswer = recordSchema({
  ...importCounts,
  Batches: integer,
  Terminated: integer,
  Rejections: {
    ...recordListSchema({ Batch: integer, ...rejection }),
    description: `The first ${maxListedRejections} rejected rows, by batch and row (Rejected counts them all).`,
  },
})
