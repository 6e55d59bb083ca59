import type { IncomingMessage } from 'node:http'
import { refused, unauthorized } from '../http/errors.ts'

/** The four credential items of interface 5.1, as sent. */
export interface Credentials {
  apiKey?: string
  apiDate?: string
  apiHmac?: string
  apiToday?: string
}

const itemField = {
  'x-apikey': 'apiKey',
  'x-apidate': 'apiDate',
  'x-apihmac': 'apiHmac',
  'x-apitoday': 'apiToday',
} as const satisfies Record<string, keyof Credentials>
type ItemName = keyof typeof itemField

// `<item><spaces | = | :><value>`; the value runs to the end of its piece.
const itemPattern = /^\s*(x-api(?:key|date|hmac|today))(?:\s*[=:]\s*|\s+)(.*?)\s*$/i
// Folded Authorization lines are split only where a new item starts (a date has commas).
const foldedBoundary = /,\s*(?=x-api(?:key|date|hmac|today)(?:\s|=|:))/i

function assign(found: Credentials, item: string, value: string): void {
  const field = itemField[item.toLowerCase() as ItemName]
  if (found[field] !== undefined) throw refused(unauthorized(`Credential ${item.toLowerCase()} was given more than once.`), 'malformed_credentials')
  found[field] = value
}

/**
 * Reads the credentials in every form D2 accepts: repeated `Authorization` lines,
 * one folded line, or plain `x-api*` headers. An item given twice, in any mix of
 * forms, is refused, so a forged second value can never win by its position.
 */
export function readCredentials(request: IncomingMessage): Credentials {
  const found: Credentials = {}
  const headers = request.headers
  if (headers.authorization !== undefined) {
    // req.headers keeps only the first Authorization line; the raw list has them all.
    const raw = request.rawHeaders
    for (let index = 0; index < raw.length; index += 2) {
      if (raw[index].length !== 13 || raw[index].toLowerCase() !== 'authorization') continue
      for (const piece of raw[index + 1].split(foldedBoundary)) {
        const match = itemPattern.exec(piece)
        if (!match) {
          // An Authorization line of another scheme (Basic, Bearer) is not ours to read.
          if (/^\s*x-api/i.test(piece)) throw refused(unauthorized('Malformed credential in Authorization header.'), 'malformed_credentials')
          continue
        }
        assign(found, match[1], match[2])
      }
    }
  }
  // Node joins repeated x-api* headers with ', '. No key, signature or day code has a
  // comma, so one there means the item came twice; a doubled date no longer parses.
  readPlain(found, 'x-apikey', headers['x-apikey'])
  readPlain(found, 'x-apidate', headers['x-apidate'])
  readPlain(found, 'x-apihmac', headers['x-apihmac'])
  readPlain(found, 'x-apitoday', headers['x-apitoday'])
  return found
}

function readPlain(found: Credentials, item: ItemName, value: string | string[] | undefined): void {
  if (value === undefined) return
  const text = (Array.isArray(value) ? value.join(', ') : value).trim()
  if (item !== 'x-apidate' && text.includes(',')) throw refused(unauthorized(`Credential ${item} was given more than once.`), 'malformed_credentials')
  assign(found, item, text)
}
