import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Secrets at rest (D9): AES-256-GCM under the master key, bound to a context string
 * (the API key) so a ciphertext copied onto another row does not decrypt.
 */
export class SecretBox {
  constructor(private readonly masterKey: Buffer) {
    if (masterKey.length !== 32) throw new Error('master key must be 32 bytes')
  }

  seal(plaintext: string, context: string): string {
    const iv = randomBytes(12)
    const cipher = createCipheriv('aes-256-gcm', this.masterKey, iv)
    cipher.setAAD(Buffer.from(context))
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
    return `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`
  }

  open(sealed: string, context: string): string {
    if (!sealed.startsWith('v1:')) throw new Error('unknown secret format')
    const raw = Buffer.from(sealed.slice(3), 'base64')
    const decipher = createDecipheriv('aes-256-gcm', this.masterKey, raw.subarray(0, 12))
    decipher.setAAD(Buffer.from(context))
    decipher.setAuthTag(raw.subarray(12, 28))
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8')
  }
}

/** The configured master key, or the one in dataDir/master.key, generated (0600) when absent. */
export function loadMasterKey(configured: string | null, dataDir: string): Buffer {
  if (configured) return Buffer.from(configured, 'hex')
  const file = join(dataDir, 'master.key')
  if (existsSync(file)) {
    const text = readFileSync(file, 'utf8').trim()
    if (!/^[0-9a-f]{64}$/i.test(text)) throw new Error(`${file} does not hold a 64-hex-digit master key`)
    return Buffer.from(text, 'hex')
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const key = randomBytes(32)
  // 'wx' fails if another process created it meanwhile; then read theirs.
  try {
    writeFileSync(file, key.toString('hex') + '\n', { mode: 0o600, flag: 'wx' })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return loadMasterKey(null, dataDir)
    throw error
  }
  return key
}
