import Papa from 'papaparse'
import { badRequest } from '../../kernel/sdk.ts'
import { editableFields, type PersonInput } from './fields.ts'

/**
 * The rows of an importmass `Csv` batch (D13). The first line that is not blank names
 * the columns; each later record is one row, numbered by the physical line it starts on,
 * the line after the header being 1 (blank lines and line breaks inside quoted fields
 * count, so a number points at the line an editor shows).
 */

/** One row of a batch as sent, and its 1-based number (for CSV: its line, counted from the line after the header). */
export interface SentRow {
  row: number
  fields: unknown
  problem?: string
}

const importFieldNames = [...editableFields.map((field) => field.name), 'Custno']
const importFieldByLowerName = new Map(importFieldNames.map((name) => [name.toLowerCase(), name]))

/** 400 naming any column of a CSV header that is not an import field, or one given twice. */
function checkCsvHeader(header: readonly string[]): string[] {
  const unknown = header.filter((name) => !importFieldByLowerName.has(name.toLowerCase()))
  if (unknown.length > 0) throw badRequest(`Unknown CSV column ${unknown.map((name) => `'${name}'`).join(', ')}. Columns: ${importFieldNames.join(', ')}.`)
  const fields = header.map((name) => importFieldByLowerName.get(name.toLowerCase())!)
  const twice = fields.find((field, at) => fields.indexOf(field) !== at)
  if (twice !== undefined) throw badRequest(`CSV column '${twice}' is given more than once.`)
  return fields
}

/** Line breaks in text[from, to): `linebreak` is the one papaparse found in the text. */
function lineBreaks(text: string, linebreak: string, from: number, to: number): number {
  let count = 0
  for (let at = text.indexOf(linebreak, from); at !== -1 && at < to; at = text.indexOf(linebreak, at + linebreak.length)) count++
  return count
}

/** The message of a quote papaparse found never closed, on `where` ("row 3"). */
function unclosedQuote(where: string): Error {
  return badRequest(`A quoted field that starts on ${where} is never closed, so every line after it would be read into that field; nothing of this batch was written.`)
}

/**
 * papaparse hands over one record at a time (`step`), each turned into its row at once:
 * the parsed text is never held twice, and rows past `maxRows` are only counted. Every
 * physical line outside quotes is a record of its own, so a record starts on the line
 * after the line breaks of the records before it. Blank records (every cell white space)
 * are skipped. A quote that is never closed makes papaparse read the rest of the text
 * into one field: the whole batch is refused (400) rather than its later rows dropped.
 */
export function rowsFromCsv(csv: string, maxRows: number): SentRow[] {
  // papaparse drops a BOM and counts its cursor without it; so do we.
  const text = csv.startsWith('\ufeff') ? csv.slice(1) : csv
  const rows: SentRow[] = []
  let count = 0
  let fields: string[] | undefined
  let headerLines = 0
  let consumed = 0 // where the current record's text starts: papaparse's cursor after the one before
  let linesBefore = 0 // line breaks before `consumed`
  let refusal: Error | undefined
  Papa.parse<string[]>(text, {
    step(result, parser) {
      const linebreak = result.meta.linebreak || '\n'
      const startLine = linesBefore + 1
      const unclosed = result.errors.find((error) => error.code === 'MissingQuotes')
      if (unclosed !== undefined) {
        // papaparse's index is just past the opening quote.
        const quoteLine = startLine + lineBreaks(text, linebreak, consumed, Math.max(consumed, (unclosed.index ?? consumed + 1) - 1))
        refusal = unclosedQuote(fields === undefined ? 'the header line' : `row ${quoteLine - headerLines}`)
        return parser.abort()
      }
      linesBefore += lineBreaks(text, linebreak, consumed, result.meta.cursor)
      consumed = result.meta.cursor
      const cells = result.data
      if (cells.every((cell) => cell.trim() === '')) return
      if (fields === undefined) {
        headerLines = linesBefore
        try {
          fields = checkCsvHeader(cells.map((name) => name.trim()))
        } catch (error) {
          refusal = error as Error
          parser.abort()
        }
        return
      }
      if (++count > maxRows) return
      const input: PersonInput = {}
      cells.forEach((value, at) => {
        const field = fields![at]
        if (field === undefined) return
        if (field === 'Custno') {
          // An empty Custno cell means "not given"; any other text must be a whole number.
          if (value.trim() !== '') input.Custno = /^\d{1,15}$/.test(value.trim()) ? Number(value.trim()) : (value as never)
        } else {
          input[field] = value
        }
      })
      // papaparse's own texts, as its header mode gave them before.
      const malformed = result.errors.find((error) => error.type === 'Quotes')
      const problem = malformed !== undefined ? `${malformed.message}.` : cells.length === fields.length ? undefined
        : `Too ${cells.length < fields.length ? 'few' : 'many'} fields: expected ${fields.length} fields but parsed ${cells.length}.`
      rows.push({ row: startLine - headerLines, fields: input, problem })
    },
  })
  if (refusal !== undefined) throw refusal
  if (fields === undefined) throw badRequest('Csv has no header line: its first line names the columns, e.g. Source_Id,LastName,FirstName.')
  if (count > maxRows) throw badRequest(`A batch holds at most ${maxRows} rows; this one has ${count}.`)
  return rows
}
