/**
 * D4 in the browser, byte for byte as kernel/auth/signature.ts verifies it:
 * METHOD \n PATH (after the base path, query included) \n x-apidate \n hex(sha256(body)),
 * HMAC-SHA256 under the secret, lowercase hex. The date is RFC 3339 to the millisecond,
 * so two identical writes within one second are two signatures (no replay refusal).
 */
const encoder = new TextEncoder()

function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (byte) => byte.toString(16).padStart(2, '0')).join('')
}

export async function sha256Hex(text: string): Promise<string> {
  return hex(await crypto.subtle.digest('SHA-256', encoder.encode(text)))
}

export async function signature(secret: string, method: string, path: string, apiDate: string, body: string): Promise<string> {
  const toSign = `${method.toUpperCase()}\n${path}\n${apiDate}\n${await sha256Hex(body)}`
  const key = await crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign'])
  return hex(await crypto.subtle.sign('HMAC', key, encoder.encode(toSign)))
}

export interface Credentials {
  apiKey: string
  secret: string
}

/** The plain-header form of D2. */
export async function signedHeaders(credentials: Credentials, method: string, path: string, body: string, today?: string): Promise<Record<string, string>> {
  const date = new Date().toISOString()
  const headers: Record<string, string> = {
    'x-apikey': credentials.apiKey,
    'x-apidate': date,
    'x-apihmac': await signature(credentials.secret, method, path, date, body),
  }
  if (today) headers['x-apitoday'] = today
  return headers
}
