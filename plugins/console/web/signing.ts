/**
 * D4 in the browser, byte for byte as kernel/auth/signature.ts verifies it:
 * METHOD \n PATH (after the base path, query included) \n x-apidate \n hex(sha256(body)),
 * HMAC under the secret, lowercase hex: SHA-256 unless the key's Require_Hash (or its
 * ACL's) names another; sign-in finds which (app.tsx). The browser has no HMAC-MD5, so a
 * key bound to md5 (Require_Hash 1) is used with `npm run call`. The date is RFC 3339 to
 * the millisecond, so two identical writes within one second are two signatures (no
 * replay refusal).
 */
const encoder = new TextEncoder()

function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (byte) => byte.toString(16).padStart(2, '0')).join('')
}

export async function sha256Hex(text: string): Promise<string> {
  return hex(await crypto.subtle.digest('SHA-256', encoder.encode(text)))
}

/** The HMAC methods of D4 that the browser has, the default first. */
export const signingHashes = ['SHA-256', 'SHA-512', 'SHA-384', 'SHA-1'] as const
export type SigningHash = (typeof signingHashes)[number]

export async function signature(secret: string, method: string, path: string, apiDate: string, body: string, hash: SigningHash = 'SHA-256'): Promise<string> {
  const toSign = `${method.toUpperCase()}\n${path}\n${apiDate}\n${await sha256Hex(body)}`
  const key = await crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash }, false, ['sign'])
  return hex(await crypto.subtle.sign('HMAC', key, encoder.encode(toSign)))
}

export interface Credentials {
  apiKey: string
  secret: string
  /** The HMAC method the key signs with; SHA-256 when absent. */
  hash?: SigningHash
}

/** The plain-header form of D2. */
export async function signedHeaders(credentials: Credentials, method: string, path: string, body: string, today?: string): Promise<Record<string, string>> {
  const date = new Date().toISOString()
  const headers: Record<string, string> = {
    'x-apikey': credentials.apiKey,
    'x-apidate': date,
    'x-apihmac': await signature(credentials.secret, method, path, date, body, credentials.hash),
  }
  if (today) headers['x-apitoday'] = today
  return headers
}
