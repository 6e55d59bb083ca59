import { createHmac, randomBytes } from 'node:crypto'
import { badRequest } from '../../kernel/sdk.ts'

/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): the secret is
 * `whsec_` + base64 of random bytes; each attempt is signed as
 * `v1,` + base64(HMAC-SHA256(secret bytes, `${webhook-id}.${webhook-timestamp}.${body}`)),
 * so receivers can verify with the published `standardwebhooks` libraries.
 */
const secretPrefix = 'whsec_'
const secretBytes = 24
const base64 = /^[A-Za-z0-9+/]+={0,2}$/

export function newWebhookSecret(): string {
  return secretPrefix + randomBytes(secretBytes).toString('base64')
}

/** A secret given by the caller: whsec_ + base64 of 24 to 64 bytes. */
export function checkedWebhookSecret(secret: string): string {
  const encoded = secret.startsWith(secretPrefix) ? secret.slice(secretPrefix.length) : ''
  const size = base64.test(encoded) && encoded.length % 4 === 0 ? Buffer.from(encoded, 'base64').length : 0
  if (size < secretBytes || size > 64) throw badRequest(`Secret must be ${secretPrefix} followed by the base64 of 24 to 64 random bytes.`)
  return secret
}

/** The headers of one attempt. `timestamp` in seconds since the epoch. */
export function signatureHeaders(secret: string, messageId: string, timestamp: number, body: string): Record<string, string> {
  const key = Buffer.from(secret.slice(secretPrefix.length), 'base64')
  const signature = createHmac('sha256', key).update(`${messageId}.${timestamp}.${body}`).digest('base64')
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': `v1,${signature}`,
  }
}

/** A delivery's id (`webhook-id`): unique, the same on every retry. */
export function newMessageId(): string {
  return 'msg_' + randomBytes(18).toString('base64url')
}
