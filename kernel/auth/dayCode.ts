import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

/** D5: RFC 6238 TOTP, HMAC-SHA-1, 8 digits, a 4-hour step, ±1 step of drift. */
export interface DayCodeOptions {
  stepSeconds: number
  digits: number
  drift: number
}

export const dayCodeDefaults: DayCodeOptions = { stepSeconds: 14_400, digits: 8, drift: 1 }

/** RFC 4226 HOTP value for one counter. */
export function hotp(secret: Buffer, counter: number, digits: number): string {
  const message = Buffer.alloc(8)
  message.writeBigUInt64BE(BigInt(counter))
  const digest = createHmac('sha1', secret).update(message).digest()
  const offset = digest[digest.length - 1] & 0x0f
  const binary = (digest.readUInt32BE(offset) & 0x7fffffff) % 10 ** digits
  return binary.toString().padStart(digits, '0')
}

export function dayCodeAt(secret: Buffer, timeMs: number, options: DayCodeOptions = dayCodeDefaults): string {
  return hotp(secret, Math.floor(timeMs / 1000 / options.stepSeconds), options.digits)
}

/** True when `code` is the code of the current step or one step either side. */
export function verifyDayCode(secret: Buffer, code: string, nowMs: number, options: DayCodeOptions = dayCodeDefaults): boolean {
  if (code.length !== options.digits || !/^\d+$/.test(code)) return false
  const step = Math.floor(nowMs / 1000 / options.stepSeconds)
  const given = Buffer.from(code)
  let matched = false
  for (let drift = -options.drift; drift <= options.drift; drift++) {
    // Every candidate is compared so timing does not reveal which step matched.
    if (timingSafeEqual(Buffer.from(hotp(secret, step + drift, options.digits)), given)) matched = true
  }
  return matched
}

export function newDaySecret(): Buffer {
  return randomBytes(20)
}

const base32Alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'

export function base32(data: Buffer): string {
  let bits = 0
  let value = 0
  let output = ''
  for (const byte of data) {
    value = (value << 8) | byte
    bits += 8
    while (bits >= 5) {
      output += base32Alphabet[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
  }
  if (bits > 0) output += base32Alphabet[(value << (5 - bits)) & 31]
  return output
}

/** An otpauth:// URI for authenticator apps (`admin daycode --uri`). */
export function dayCodeUri(secret: Buffer, issuer: string, options: DayCodeOptions = dayCodeDefaults): string {
  const label = encodeURIComponent(`${issuer}:day-code`)
  return `otpauth://totp/${label}?secret=${base32(secret)}&issuer=${encodeURIComponent(issuer)}&algorithm=SHA1&digits=${options.digits}&period=${options.stepSeconds}`
}
