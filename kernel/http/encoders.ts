import { parse as toXml } from 'js2xmlparser'
import Papa from 'papaparse'
import type { ResponseFormat, Route } from '../plugin.ts'
import { xmlName, xmlSafe } from './xmlSafe.ts'
import { RawAnswer } from './rawAnswer.ts'
import { answerValue, jsonBody, JsonText } from './jsonText.ts'
import type { AnswerBody } from './bodyPieces.ts'
import { ApiError } from './errors.ts'

export interface Encoded {
  body: AnswerBody
  contentType: string
  /** Set by a RawAnswer (e.g. 304); otherwise the answer is 200. */
  status?: number
}

export const contentTypes: Record<ResponseFormat, string> = {
  json: 'application/json; charset=utf-8',
  xml: 'application/xml; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
}

/** The formats each media range of an Accept header covers, in the order one is picked when the key's own is not among them. */
const acceptRanges: Record<string, readonly ResponseFormat[]> = {
  'application/json': ['json'],
  'application/xml': ['xml'],
  'text/xml': ['xml'],
  'text/csv': ['csv'],
  'application/*': ['json', 'xml'],
  'text/*': ['csv', 'xml'],
  '*/*': ['json', 'xml', 'csv'],
}

/**
 * An Accept header's media ranges, lower-cased, with their q (1 when absent); ranges whose
 * q is not a number from 0 to 1 are dropped, as if not sent.
 */
function mediaRanges(accept: string): { mediaType: string; quality: number }[] {
  const ranges: { mediaType: string; quality: number }[] = []
  for (const range of accept.toLowerCase().split(',')) {
    const [mediaType, ...parameters] = range.split(';')
    let quality = 1
    for (const parameter of parameters) {
      const [name, value] = parameter.split('=')
      if (name.trim() === 'q') quality = Number(value?.trim())
    }
    if (quality >= 0 && quality <= 1) ranges.push({ mediaType: mediaType.trim(), quality })
  }
  return ranges
}

/** How specific a media range is: a full type over `type/*` over the any-type range (RFC 9110 12.5.1). */
function specificity(mediaType: string): number {
  return mediaType === '*/*' ? 0 : mediaType.endsWith('/*') ? 1 : 2
}

/**
 * The format an Accept header prefers among ours (RFC 9110 12.5.1): the highest q,
 * the first listed on a tie; q=0 means "not this one" where the most specific range
 * naming a format says it, so the any-type range or `application/*` with q=0 refuse
 * what they cover unless a more specific range names it (with `text/csv` too: csv); a wildcard
 * range (the any-type range, `application/*`, `text/*`) stands for the key's own format
 * when it covers it and that is not refused, else for the first it covers that is not.
 * Null when it names none of ours (the key's format then applies); 406 when it refuses all three.
 */
function acceptedFormat(accept: string, keyFormat: ResponseFormat): ResponseFormat | null {
  const ranges: { covers: readonly ResponseFormat[]; rank: number; quality: number }[] = []
  for (const { mediaType, quality } of mediaRanges(accept)) {
    const covers = acceptRanges[mediaType]
    if (covers !== undefined) ranges.push({ covers, rank: specificity(mediaType), quality })
  }
  // A format is refused when the most specific ranges naming it all say q=0.
  const refused = new Set<ResponseFormat>()
  for (const format of acceptRanges['*/*']) {
    const naming = ranges.filter((range) => range.covers.includes(format))
    const rank = Math.max(...naming.map((range) => range.rank))
    if (naming.length > 0 && naming.every((range) => range.rank < rank || range.quality === 0)) refused.add(format)
  }
  const pick = (covers: readonly ResponseFormat[]) => (covers.includes(keyFormat) && !refused.has(keyFormat) ? keyFormat : covers.find((format) => !refused.has(format)))
  let best: ResponseFormat | null = null
  let bestQuality = 0
  for (const range of ranges) {
    if (!(range.quality > bestQuality)) continue
    const format = pick(range.covers)
    if (format === undefined) continue
    best = format
    bestQuality = range.quality
  }
  if (best !== null) return best
  // Only refusals: the first of ours not refused; a key's format the client refused is never forced on it.
  if (refused.size === 0) return null
  const other = pick(acceptRanges['*/*'])
  if (other === undefined) throw new ApiError('NOT_ACCEPTABLE', 'The Accept header refuses every format of this service (json, xml, csv).')
  return other
}

/**
 * Whether an Accept header takes a route's own content type (a RawAnswer's: a feed, a
 * page, `image/*`): the most specific ranges matching it (RFC 9110 12.5.1) have q > 0.
 * Such a route answers its type whatever json/xml/csv the header refuses.
 */
export function acceptsType(accept: string, contentType: string): boolean {
  const [type, subtype = ''] = contentType.split(';')[0].trim().toLowerCase().split('/')
  let rank = -1
  let quality = 0
  for (const { mediaType, quality: rangeQuality } of mediaRanges(accept)) {
    const [rangeType, rangeSubtype] = mediaType.split('/')
    const rangeRank =
      rangeType === '*' && rangeSubtype === '*' ? 0 : rangeType !== type ? -1 : rangeSubtype === '*' ? 1 : rangeSubtype === subtype || subtype === '*' ? 2 : -1
    if (rangeRank < 0 || rangeRank < rank) continue
    quality = rangeRank > rank ? rangeQuality : Math.max(quality, rangeQuality)
    rank = rangeRank
  }
  return quality > 0
}

/**
 * The format of one answer (D12): `?format=` first, then an Accept header naming one
 * of ours, then the key's ResponseFormat. Returns null for an unknown `?format=`.
 */
export function chooseFormat(queryFormat: string | undefined, accept: string | undefined, keyFormat: ResponseFormat): ResponseFormat | null {
  if (queryFormat !== undefined) {
    const lower = queryFormat.toLowerCase()
    return lower === 'json' || lower === 'xml' || lower === 'csv' ? lower : null
  }
  if (accept !== undefined && accept !== '*/*') return acceptedFormat(accept, keyFormat) ?? keyFormat
  return keyFormat
}

// A null becomes an empty element rather than the text "null".
const xmlOptions = {
  declaration: { include: true, encoding: 'UTF-8' },
  format: { doubleQuotes: true },
  typeHandlers: { '[object Null]': () => '' },
}

/**
 * CSV injection (OWASP): a text cell whose first non-space character is = + - @ (or
 * their full-width forms ＝ ＋ － ＠), or that starts with a tab or carriage return, is
 * quoted with a leading ' so a spreadsheet never runs it as a formula.
 */
const formulaStart = /^[\t\r]|^[\s\u3000]*[=+\-@\uFF1D\uFF0B\uFF0D\uFF20]/

function csvCell(value: unknown): unknown {
  return value !== null && typeof value === 'object' ? JSON.stringify(value) : value
}

function toCsv(rows: unknown[]): string {
  const records = rows.map((row) => {
    if (row === null || typeof row !== 'object') return { Value: row }
    const flat: Record<string, unknown> = {}
    for (const [name, value] of Object.entries(row)) flat[name] = csvCell(value)
    return flat
  })
  return Papa.unparse(records, { escapeFormulae: formulaStart, newline: '\r\n' })
}

/** A wrapped list (xml.list): its records as `item` elements beside the other fields, not a nested list element. */
function xmlContent(result: unknown, xml: Route['xml']): unknown {
  if (Array.isArray(result)) return { [xml.item ?? 'Item']: result }
  if (xml.list === undefined || result === null || typeof result !== 'object') return result
  const { [xml.list]: records, ...fields } = result as Record<string, unknown>
  if (Array.isArray(records)) return { ...fields, [xml.item ?? 'Item']: records }
  // A text in place of the records (interface 4.5: "No people found") is kept, in
  // <Message>: under the list's own name it would nest <People> in <People> again.
  return typeof records === 'string' ? { ...fields, Message: records } : fields
}

/** Encodes a handler's answer in the chosen format (a JsonText's value is parsed only for xml and csv). */
export function encode(answer: unknown, format: ResponseFormat, route: Pick<Route, 'xml' | 'csv' | 'csvColumns'>, csvRows?: unknown[]): Encoded {
  if (RawAnswer.is(answer)) return { body: answer.body, contentType: answer.contentType, status: answer.status }
  if (JsonText.is(answer) && format === 'json') return { body: jsonBody(answer), contentType: contentTypes.json }
  const result = answerValue(answer)
  if (format === 'json') return { body: Buffer.from(JSON.stringify(result)), contentType: contentTypes.json }
  if (format === 'xml') {
    // xmlSafe: no stored text or field name can make the encoder throw (xmlSafe.ts).
    const content = xmlSafe(xmlContent(result, route.xml))
    // A carriage return in text, written as it is, reaches an XML reader as a line feed
    // (end-of-line handling, XML 1.0 2.11); as &#13; it stays what JSON and CSV carry.
    // Every \r of the document is text's: names have none and the layout uses \n.
    const xml = toXml(xmlName(route.xml.root), content ?? '', xmlOptions)
    return { body: Buffer.from(xml.includes('\r') ? xml.replaceAll('\r', '&#13;') : xml), contentType: contentTypes.xml }
  }
  const rows = csvRows ?? (Array.isArray(result) ? result : [result])
  // No records: still the header row, so a reader sees the columns (and not an empty file).
  if (rows.length === 0 && route.csvColumns) return { body: Buffer.from(Papa.unparse({ fields: [...route.csvColumns], data: [] }, { newline: '\r\n' })), contentType: contentTypes.csv }
  return { body: Buffer.from(toCsv(rows)), contentType: contentTypes.csv }
}
