import { createHash, createHmac, timingSafeEqual } from 'node:crypto'

/** Require_Hash values of interface 2.2 and the digest each one names. */
export const hashAlgorithms = { 1: 'md5', 2: 'sha1', 3: 'sha256', 4: 'sha384', 5: 'sha512' } as const
export type HashMethod = 0 | keyof typeof hashAlgorithms

// Hex length of each digest, so Require_Hash 0 ("any method") can tell which was used.
const algorithmByHexLength: Record<number, string> = { 32: 'md5', 40: 'sha1', 64: 'sha256', 96: 'sha384', 128: 'sha512' }
const emptyBodyHash = createHash('sha256').update('').digest('hex')
const hexPattern = /^[0-9a-f]+$/i

export function bodyHash(body: Buffer | string | undefined): string {
  if (body === undefined || body.length === 0) return emptyBodyHash
  return createHash('sha256').update(body).digest('hex')
}

/**
 * Equality of two signatures as sent, in time that depends on their length only. It
 * compares characters, not UTF-8 bytes: a header value that is not ASCII (Node reads
 * header bytes as latin1) can have the length of a signature but not its byte length,
 * and must be a plain mismatch, never a thrown RangeError (which was a 500). No
 * allocation either: this runs on every call that reuses a signature within its second.
 */
export function sameSignature(a: string, b: string): boolean {
  if (a.length !== b.length) return false
  let difference = 0
  for (let index = 0; index < a.length; index++) difference |= a.charCodeAt(index) ^ b.charCodeAt(index)
  return difference === 0
}

/** D4: METHOD \n PATH(+query, after the base path) \n x-apidate \n hex(sha256(body)). */
export function stringToSign(method: string, path: string, apiDate: string, body: Buffer | string | undefined): string {
  return `${method.toUpperCase()}\n${path}\n${apiDate}\n${bodyHash(body)}`
}

/** The x-apihmac value a client sends; the signing client uses this very function. */
export function sign(secret: string, method: string, path: string, apiDate: string, body?: Buffer | string, hashMethod: HashMethod = 3): string {
  const algorithm = hashMethod === 0 ? 'sha256' : hashAlgorithms[hashMethod]
  return createHmac(algorithm, secret).update(stringToSign(method, path, apiDate, body)).digest('hex')
}

/**
 * Checks a signature in constant time. With a fixed method only that digest is
 * accepted; with 0 the digest length says which of the five was used.
 */
export function verifySignature(secret: string, toSign: string, given: string, required: HashMethod): boolean {
  const algorithm = required === 0 ? algorithmByHexLength[given.length] : hashAlgorithms[required]
  if (algorithm === undefined || !hexPattern.test(given)) return false
  const expected = createHmac(algorithm, secret).update(toSign).digest()
  const actual = Buffer.from(given, 'hex')
  return actual.length === expected.length && timingSafeEqual(actual, expected)
}

export interface SigningKey {
  apiKey: string
  secret: string
}

/**
 * The credential headers for one call, as the plain-header form of D2. Used by the
 * `npm run call` client, the benchmark and the tests, so all sign exactly as the
 * server verifies.
 */
export function signedHeaders(
  key: SigningKey,
  method: string,
  path: string,
  body?: Buffer | string,
  options: { date?: string; today?: string; hashMethod?: HashMethod } = {},
): Record<string, string> {
  const date = options.date ?? new Date().toUTCString()
  const headers: Record<string, string> = {
    'x-apikey': key.apiKey,
    'x-apidate': date,
    'x-apihmac': sign(key.secret, method, path, date, body, options.hashMethod ?? 3),
  }
  if (options.today !== undefined) headers['x-apitoday'] = options.today
  return headers
}
