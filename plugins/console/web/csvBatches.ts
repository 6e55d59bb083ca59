import Papa from 'papaparse'

/**
 * A piece of a CSV file: its header line, then `rows` whole rows cut from the file's own
 * text (blank lines kept). A row the server numbers `n` in this batch is the file's row
 * `n + rowOffset` (1 = the line after the file's header, docs/people.md "Imports").
 */
export interface CsvBatch {
  text: string
  rows: number
  rowOffset: number
}

/** The file cut into batches, or why the server would refuse it whole. */
export type CsvPlan = { batches: CsvBatch[]; rows: number } | { error: string }

/** Line breaks in text[from, to). */
function lineBreaks(text: string, linebreak: string, from: number, to: number): number {
  let count = 0
  for (let at = text.indexOf(linebreak, from); at !== -1 && at < to; at = text.indexOf(linebreak, at + linebreak.length)) count++
  return count
}

/**
 * Reads the whole file with the parser the server uses (papaparse), record by record, so
 * records, blank lines and physical lines are counted exactly as one importmass call of
 * the whole file counts them; then cuts it into batches of at most `size` rows. A quote
 * that is never closed is found here, before anything is sent: the server would refuse
 * the file whole, and batches would write the rows before it.
 */
export function planCsv(csv: string, size: number): CsvPlan {
  const text = csv.startsWith('\ufeff') ? csv.slice(1) : csv
  let header: string | undefined
  let headerEnd = 0
  let headerLines = 0
  let consumed = 0 // where the current record starts: papaparse's cursor after the one before
  let linesBefore = 0 // line breaks before `consumed`
  let error: string | undefined
  // Each row: where its text ends (with its line break) and the line breaks up to there.
  const rows: { to: number; linesAfter: number }[] = []
  Papa.parse<string[]>(text, {
    step(result, parser) {
      const linebreak = result.meta.linebreak || '\n'
      const unclosed = result.errors.find((problem) => problem.code === 'MissingQuotes')
      if (unclosed !== undefined) {
        // papaparse's index is just past the opening quote.
        const quoteLine = linesBefore + 1 + lineBreaks(text, linebreak, consumed, Math.max(consumed, (unclosed.index ?? consumed + 1) - 1))
        error = `Error: A quoted field that starts on ${header === undefined ? 'the header line' : `row ${quoteLine - headerLines}`} is never closed, so every line after it would be read into that field; nothing of the file was sent.`
        return parser.abort()
      }
      const from = consumed
      linesBefore += lineBreaks(text, linebreak, consumed, result.meta.cursor)
      consumed = result.meta.cursor
      if (result.data.every((cell) => cell.trim() === '')) return
      if (header === undefined) {
        header = text.slice(from, consumed)
        headerEnd = consumed
        headerLines = linesBefore
      } else {
        rows.push({ to: consumed, linesAfter: linesBefore })
      }
    },
  })
  if (error !== undefined) return { error }
  if (header === undefined) return { error: 'Error: The file has no header line: its first line names the columns, e.g. Source_Id,LastName,FirstName.' }
  if (rows.length === 0) return { error: 'Error: The file has no rows after its header line.' }
  const batches: CsvBatch[] = []
  for (let at = 0; at < rows.length; at += size) {
    const part = rows.slice(at, at + size)
    // From the end of the batch before, so blank lines stay and count as the server counts them.
    const from = at === 0 ? headerEnd : rows[at - 1].to
    const linesAtFrom = at === 0 ? headerLines : rows[at - 1].linesAfter
    batches.push({ text: header + text.slice(from, part[part.length - 1].to), rows: part.length, rowOffset: linesAtFrom - headerLines })
  }
  return { batches, rows: rows.length }
}
