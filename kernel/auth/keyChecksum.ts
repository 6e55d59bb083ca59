import { randomBytes } from 'node:crypto'
import { crc32 } from 'node:zlib'

/**
 * Self-checking key strings (issue 16 item 5): `kg_` + 22 base62 characters of 128 random
 * bits + 6 base62 characters of the CRC32 of everything before them. A typo is caught
 * by arithmetic, before any cache or database lookup, and a secret scanner can tell a
 * real key from look-alike text by the same check. Keys of the older form (`kg_` + 22
 * base64url characters, no checksum) keep working; they are simply looked up.
 */

const base62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const randomLength = 22
const checksumLength = 6

/** The pattern a secret scanner can match (docs/keys.md, SECURITY.md). */
export const checkedKeyPattern = /^kg_[0-9A-Za-z]{28}$/
const legacyKeyPattern = /^kg_[0-9A-Za-z_-]{22}$/

function toBase62(value: bigint, width: number): string {
  let text = ''
  for (let left = value; left > 0n; left /= 62n) text = base62[Number(left % 62n)] + text
  return text.padStart(width, '0')
}

/** The 6 checksum characters for the key text before them (`kg_` + random). */
export function keyChecksum(head: string): string {
  return toBase62(BigInt(crc32(head)), checksumLength)
}

/** A new key string with its checksum; `prefix` is apiKeyPrefix. */
export function newCheckedApiKey(prefix: string): string {
  const head = prefix + toBase62(BigInt('0x' + randomBytes(16).toString('hex')), randomLength)
  return head + keyChecksum(head)
}

/**
 * False for a `kg_` key that can be no key we issued: the new form with a checksum that
 * does not match, or neither form at all. Keys without our prefix (imported from another
 * system) are not ours to judge and are looked up as before.
 */
export function plausibleApiKey(apiKey: string): boolean {
  if (!apiKey.startsWith('kg_')) return true
  if (checkedKeyPattern.test(apiKey)) {
    const cut = apiKey.length - checksumLength
    return keyChecksum(apiKey.slice(0, cut)) === apiKey.slice(cut)
  }
  return legacyKeyPattern.test(apiKey)
}
