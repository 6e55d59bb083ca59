/** A piece of a CSV file: its header line, then `rows` whole rows starting at row `firstRow` (1 = the line after the header). */
export interface CsvBatch {
  text: string
  rows: number
  firstRow: number
}

/** The file's records as text, split at line breaks outside quotes (a quoted field may hold one). */
function records(text: string): string[] {
  const result: string[] = []
  let start = 0
  let quoted = false
  for (let index = 0; index < text.length; index++) {
    const char = text[index]
    if (char === '"') quoted = !quoted
    else if (!quoted && (char === '\n' || char === '\r')) {
      result.push(text.slice(start, index))
      if (char === '\r' && text[index + 1] === '\n') index++
      start = index + 1
    }
  }
  result.push(text.slice(start))
  return result.filter((record) => record.trim() !== '')
}

/** Cuts a CSV file into batches of at most `size` rows, each with the header line first. */
export function csvBatches(text: string, size: number): CsvBatch[] {
  const [header, ...rows] = records(text.replace(/^\uFEFF/, ''))
  if (header === undefined) return []
  const batches: CsvBatch[] = []
  for (let at = 0; at < rows.length; at += size) {
    const part = rows.slice(at, at + size)
    batches.push({ text: [header, ...part].join('\n'), rows: part.length, firstRow: at + 1 })
  }
  return batches
}
