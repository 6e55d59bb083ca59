import { httpDate, parseInputDate, type CalendarDay, type Selectable, type Updateable } from '../../kernel/sdk.ts'
import type { PeopleTable } from './tables.ts'

/**
 * The person record of interface 2.4, and the one place that maps its API field names
 * to columns and back. Routes, listings and imports all go through here, so a field
 * is added by adding one line to `editableFields` (and a migration for its column).
 */

export type PersonRow = Selectable<PeopleTable>
export type PersonColumns = Updateable<PeopleTable>

type FieldKind = 'text' | 'email' | 'date' | 'birthday' | 'dateTime' | 'gender'

interface EditableField {
  /** The API name (interface 2.4). */
  name: string
  column: keyof PeopleTable & string
  kind: FieldKind
  maxLength: number
}

/** Fields a client may set (OneChange, imports). Id, Created, Deleted, Parent and DateEdit are the server's. */
export const editableFields: readonly EditableField[] = [
  { name: 'Emp_Id', column: 'emp_id', kind: 'text', maxLength: 64 },
  { name: 'DispGroup', column: 'disp_group', kind: 'text', maxLength: 100 },
  { name: 'Source_Id', column: 'source_id', kind: 'text', maxLength: 100 },
  { name: 'Location', column: 'location', kind: 'text', maxLength: 100 },
  { name: 'Email', column: 'email', kind: 'email', maxLength: 255 },
  { name: 'FirstName', column: 'first_name', kind: 'text', maxLength: 100 },
  { name: 'LastName', column: 'last_name', kind: 'text', maxLength: 100 },
  { name: 'NickName', column: 'nick_name', kind: 'text', maxLength: 100 },
  { name: 'Phone', column: 'phone', kind: 'text', maxLength: 50 },
  { name: 'Web', column: 'web', kind: 'text', maxLength: 1024 },
  { name: 'Photo', column: 'photo', kind: 'text', maxLength: 1024 },
  { name: 'Gender', column: 'gender', kind: 'gender', maxLength: 1 },
  { name: 'Dept', column: 'dept', kind: 'text', maxLength: 100 },
  { name: 'Title', column: 'title', kind: 'text', maxLength: 200 },
  { name: 'Birthday', column: 'birthday', kind: 'birthday', maxLength: 40 },
  { name: 'HireDate', column: 'hire_date', kind: 'date', maxLength: 40 },
  { name: 'TermDate', column: 'term_date', kind: 'date', maxLength: 40 },
  { name: 'Skip', column: 'skip', kind: 'text', maxLength: 100 },
  { name: 'DateLast', column: 'date_last', kind: 'dateTime', maxLength: 40 },
]

export const genders = ['M', 'F', 'U'] as const

function fieldSchema(field: EditableField): object {
  // "" clears like null (an empty CSV cell is never null): both store the default U.
  if (field.kind === 'gender') return { enum: [...genders, '', null], description: 'M, F or U; "" or null clears it (U).' }
  // The address form is checked by columnsFromInput, whose 400 says it in words (a schema pattern would show the regex).
  if (field.kind === 'email') return { type: ['string', 'null'], maxLength: field.maxLength, description: 'An e-mail address such as name@example.com, or "".' }
  return { type: ['string', 'null'], maxLength: field.maxLength }
}

/** JSON-schema properties of the editable fields, plus Custno (only a parent-wide key may pick it). */
export const personFieldProperties: Record<string, object> = {
  ...Object.fromEntries(editableFields.map((field) => [field.name, fieldSchema(field)])),
  Custno: { type: 'integer', minimum: 0, maximum: 9007199254740991 },
}

/** What a client sends for one person: API names, every field optional. */
export type PersonInput = Record<string, unknown> & { Custno?: number }

const plainDate = /^(\d{4})-(\d{2})-(\d{2})$/
/** An RFC 3339 date-time: its date part, as the sender wrote it in their own offset. */
const dateTimeDate = /^(\d{4}-\d{2}-\d{2})T/i
/** Something@something, no white space: a loose check, since only the mail system knows more. */
const emailAddress = /^[^\s@]+@[^\s@]+$/
const daysInMonth = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

/**
 * A calendar date as `YYYY-MM-DD`. Input may be that, an RFC 3339 date-time, whose date
 * is taken as written (the sender's own calendar day: `1990-11-27T23:00:00-05:00` is
 * 27 November, not the UTC day it falls on), or an HTTP-date, whose date is the GMT one
 * it names. A Birthday keeps whatever year it is given (interface 2.4: "with an invalid
 * year", e.g. 0000 or 1900), so only month and day are checked there; other dates must be real days.
 */
function normalizeDate(text: string, anyYear: boolean): string | null {
  const match = plainDate.exec(text)
  if (match) {
    const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])]
    if (month < 1 || month > 12 || day < 1 || day > daysInMonth[month - 1]) return null
    const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
    if (!anyYear && month === 2 && day === 29 && !leap) return null
    return text
  }
  // A Birthday's year may be invalid on purpose (1900-02-29 stands for 29 February), as a
  // plain date's may: its date-time is checked with a leap year in that year's place.
  const time = parseInputDate(anyYear && dateTimeDate.test(text) ? `2000${text.slice(4)}` : text)
  if (time === null) return null
  const written = dateTimeDate.exec(text)
  return written ? normalizeDate(written[1], anyYear) : new Date(time).toISOString().slice(0, 10)
}

/** A calendar day as a date field stores it (`YYYY-MM-DD`): "today" is the tenant's day (D14), not UTC's. */
export function dayText(day: CalendarDay): string {
  return `${String(day.year).padStart(4, '0')}-${String(day.month).padStart(2, '0')}-${String(day.day).padStart(2, '0')}`
}

/**
 * Turns the given API fields into column values. Only fields present in `input` are
 * returned, so a change touches nothing else; null or "" clears a field. Trailing white space is dropped. Returns the
 * reason as text when a value does not fit (the caller decides: 400, or a rejected row).
 */
export function columnsFromInput(input: PersonInput): PersonColumns | string {
  const columns: Record<string, unknown> = {}
  for (const field of editableFields) {
    if (!(field.name in input)) continue
    const raw = input[field.name]
    const value = raw === null || raw === undefined || raw === '' ? null : String(raw)
    switch (field.kind) {
      case 'gender':
        columns.gender = value ?? 'U'
        break
      case 'date':
      case 'birthday': {
        if (value === null) {
          columns[field.column] = null
          break
        }
        const date = normalizeDate(value.trim(), field.kind === 'birthday')
        if (date === null) return `${field.name} must be a date (YYYY-MM-DD), got '${value}'.`
        columns[field.column] = date
        break
      }
      case 'email':
        if (value !== null && !emailAddress.test(value)) return `${field.name} must be an e-mail address such as name@example.com, got '${value}'.`
        columns[field.column] = value
        break
      case 'dateTime': {
        if (value === null) {
          columns[field.column] = null
          break
        }
        const time = parseInputDate(value.trim())
        if (time === null) return `${field.name} must be an HTTP-date or RFC 3339 date-time, got '${value}'.`
        columns[field.column] = time
        break
      }
      default: {
        // Trailing white space dropped, so "s30 " is the Source_Id "s30" on every database
        // (MariaDB's collations ignore trailing spaces in unique keys, SQLite's do not) and
        // a name of spaces is no name. Leading characters are kept as sent.
        const text = value?.trimEnd()
        columns[field.column] = text ? text : null
      }
    }
  }
  if ('photo' in columns) columns.has_photo = columns.photo ? 1 : 0
  return columns as PersonColumns
}

/** The person as answered (interface 2.4, in its field order). */
export interface PersonRecord {
  Id: number
  Emp_Id: string
  Created: string
  Deleted: number
  Parent: number
  Custno: number
  DispGroup: string
  Source_Id: string
  Location: string
  Email: string
  FirstName: string
  LastName: string
  NickName: string
  Phone: string
  Web: string
  Photo: string
  Gender: string
  Dept: string
  Title: string
  Birthday: string
  HireDate: string
  TermDate: string
  Skip: string
  DateLast: string
  DateEdit: string
}

/** The columns a person record is built from (everything but the import bookkeeping). */
export const recordColumns = [
  'id', 'emp_id', 'created', 'deleted', 'parent', 'custno', 'disp_group', 'source_id', 'location', 'email',
  'first_name', 'last_name', 'nick_name', 'phone', 'web', 'photo', 'gender', 'dept', 'title', 'birthday',
  'hire_date', 'term_date', 'skip', 'date_last', 'date_edit',
] as const

export type RecordRow = Pick<PersonRow, (typeof recordColumns)[number]>

/** The fields of a person record, in answer order: the CSV header of a listing with no one in it. */
export const personRecordFields = [
  'Id', 'Emp_Id', 'Created', 'Deleted', 'Parent', 'Custno', 'DispGroup', 'Source_Id', 'Location', 'Email',
  'FirstName', 'LastName', 'NickName', 'Phone', 'Web', 'Photo', 'Gender', 'Dept', 'Title', 'Birthday',
  'HireDate', 'TermDate', 'Skip', 'DateLast', 'DateEdit',
] as const satisfies readonly (keyof PersonRecord)[]

/**
 * An HTTP-date formatter that remembers what it formatted: a page of 100 people
 * imported together holds two or three distinct times, not 300. One per listing call.
 */
export function rememberingHttpDate(): (time: number) => string {
  const known = new Map<number, string>()
  return (time) => {
    let text = known.get(time)
    if (text === undefined) {
      text = httpDate(time)
      known.set(time, text)
    }
    return text
  }
}

/**
 * The person as answered. A column missing from `row` counts as NULL (a person rendered
 * before it is written: storedRecord.ts), and Deleted and Gender then take their defaults.
 */
export function personRecord(row: RecordRow, formatDate: (time: number) => string = httpDate): PersonRecord {
  return {
    Id: Number(row.id),
    Emp_Id: row.emp_id ?? '',
    Created: formatDate(Number(row.created)),
    Deleted: Number(row.deleted ?? 0),
    Parent: Number(row.parent),
    Custno: Number(row.custno),
    DispGroup: row.disp_group ?? '',
    Source_Id: row.source_id ?? '',
    Location: row.location ?? '',
    Email: row.email ?? '',
    FirstName: row.first_name ?? '',
    LastName: row.last_name ?? '',
    NickName: row.nick_name ?? '',
    Phone: row.phone ?? '',
    Web: row.web ?? '',
    Photo: row.photo ?? '',
    Gender: row.gender ?? 'U',
    Dept: row.dept ?? '',
    Title: row.title ?? '',
    Birthday: row.birthday ?? '',
    HireDate: row.hire_date ?? '',
    TermDate: row.term_date ?? '',
    Skip: row.skip ?? '',
    DateLast: row.date_last == null ? '' : formatDate(Number(row.date_last)),
    DateEdit: formatDate(Number(row.date_edit)),
  }
}
