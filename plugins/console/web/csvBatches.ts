import Papa from 'papaparse'

/**
 * A piece of a CSV file: its header line, then `rows` whole rows of the file's own text
 * (blank lines kept; the lines of rows sent in another batch left blank). A row the server
 * numbers `n` in this batch is the file's row `n + rowOffset` (1 = the line after the
 * file's header, docs/people.md "Imports").
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

/** A refused row of a batch's answer (importmass `Rejections`). */
export interface Rejection {
  Row: number
  Source_Id: string | null
  Reason: string
}

/**
 * A refused row as the file names it: its row, and the row a repeated Source_Id repeats,
 * counted in the file (the person never sees batches), so "of this batch" goes too.
 */
export function fileRejection(rejection: Rejection, batch: CsvBatch): Rejection {
  const reason = rejection.Reason.replace(/ repeats row (\d+) of this batch\.$/, (_, row: string) => ` repeats row ${Number(row) + batch.rowOffset}.`)
  return { ...rejection, Row: rejection.Row + batch.rowOffset, Reason: reason }
}

/** The column that holds Source_Id (the server matches names case-insensitively), or -1. */
function sourceIdColumn(header: readonly string[]): number {
  return header.findIndex((name) => name.trim().toLowerCase() === 'source_id')
}

/**
 * Reads the whole file with the parser the server uses (papaparse), record by record, so
 * records, blank lines and physical lines are counted exactly as one importmass call of
 * the whole file counts them; then cuts it into batches of about `size` rows. A quote
 * that is never closed is found here, before anything is sent: the server would refuse
 * the file whole, and batches would write the rows before it.
 *
 * Every row of one Source_Id goes in the batch of its first: the server refuses a
 * Source_Id that repeats an earlier row of its batch, and keeps the first good one, so the
 * file's repeats are refused (and the same rows kept) as one call of the whole file does
 * it; sent in different batches, a later row would silently overwrite the earlier person.
 * (The server matches on Custno too: rows of one Source_Id but other customers sharing a
 * batch changes nothing.)
 */
export function planCsv(csv: string, size: number): CsvPlan {
  const text = csv.startsWith('\ufeff') ? csv.slice(1) : csv
  let header: string | undefined
  let headerEnd = 0
  let headerLines = 0
  let sourceIdAt = -1
  let linebreak = '\n'
  let consumed = 0 // where the current record starts: papaparse's cursor after the one before
  let linesBefore = 0 // line breaks before `consumed`
  let error: string | undefined
  // Each row: where its text ends (with its line break), the line breaks up to there, its Source_Id as the server stores it.
  const rows: { to: number; linesAfter: number; sourceId: string | null }[] = []
  Papa.parse<string[]>(text, {
    step(result, parser) {
      linebreak = result.meta.linebreak || '\n'
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
        sourceIdAt = sourceIdColumn(result.data)
      } else {
        // Trailing white space is dropped when stored ("E1 " is "E1"); empty is none.
        const sourceId = result.data[sourceIdAt]?.trimEnd() || null
        rows.push({ to: consumed, linesAfter: linesBefore, sourceId })
      }
    },
  })
  if (error !== undefined) return { error }
  if (header === undefined) return { error: 'Error: The file has no header line: its first line names the columns, e.g. Source_Id,LastName,FirstName.' }
  if (rows.length === 0) return { error: 'Error: The file has no rows after its header line.' }

  const rowsOf = new Map<string, number[]>()
  rows.forEach((row, at) => {
    if (row.sourceId === null) return
    const same = rowsOf.get(row.sourceId)
    if (same) same.push(at)
    else rowsOf.set(row.sourceId, [at])
  })
  // Rows by batch, in file order: a row not yet placed is the first of its Source_Id, which brings all of them.
  const placed = new Set<number>()
  const parts: number[][] = [[]]
  rows.forEach((row, at) => {
    if (placed.has(at)) return
    const together = row.sourceId === null ? [at] : rowsOf.get(row.sourceId)!
    let part = parts[parts.length - 1]
    if (part.length > 0 && part.length + together.length > size) parts.push((part = []))
    for (const member of together) {
      placed.add(member)
      part.push(member)
    }
  })

  const batches = parts.map((part) => {
    part.sort((a, b) => a - b)
    const first = part[0]
    // From the end of the row before, so blank lines stay and count as the server counts them.
    const pieces = [header!, text.slice(first === 0 ? headerEnd : rows[first - 1].to, rows[first].to)]
    for (let at = 1; at < part.length; at++) {
      const [before, row] = [part[at - 1], part[at]]
      // Rows between, sent in other batches, stay as blank lines: the rows after keep their numbers.
      if (row > before + 1) pieces.push(linebreak.repeat(rows[row - 1].linesAfter - rows[before].linesAfter))
      pieces.push(text.slice(rows[row - 1].to, rows[row].to))
    }
    const linesAtFrom = first === 0 ? headerLines : rows[first - 1].linesAfter
    return { text: pieces.join(''), rows: part.length, rowOffset: linesAtFrom - headerLines }
  })
  return { batches, rows: rows.length }
}
