import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { loadMasterKeys, masterKeySource } from './masterKey.ts'

/**
 * Secrets at rest (D9): AES-256-GCM under the master key, bound to a context string
 * (the API key) so a ciphertext copied onto another row does not decrypt.
 * `previousKeys` open (never seal) what an interrupted master-key rotation left sealed
 * under the old key (kernel/auth/masterKey.ts).
 */
export class SecretBox {
  constructor(
    private readonly masterKey: Buffer,
    private readonly previousKeys: readonly Buffer[] = [],
  ) {
    for (const key of [masterKey, ...previousKeys]) if (key.length !== 32) throw new Error('master key must be 32 bytes')
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
    try {
      return openWith(this.masterKey, raw, context)
    } catch (error) {
      // The GCM tag fails fast for a wrong key; only a rotation's leftovers get here.
      for (const key of this.previousKeys) {
        try {
          return openWith(key, raw, context)
        } catch {}
      }
      throw error
    }
  }
}

function openWith(key: Buffer, raw: Buffer, context: string): string {
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12))
  decipher.setAAD(Buffer.from(context))
  decipher.setAuthTag(raw.subarray(12, 28))
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8')
}

/** The SecretBox of config `masterKey` (a value, a file, or the generated `dataDir/master.key`). */
export function masterSecretBox(configured: string | null, dataDir: string): SecretBox {
  const [sealing, ...previous] = loadMasterKeys(masterKeySource(configured, dataDir))
  return new SecretBox(sealing, previous)
}

/** The sealing master key of config `masterKey` (see masterSecretBox). */
export function loadMasterKey(configured: string | null, dataDir: string): Buffer {
  return loadMasterKeys(masterKeySource(configured, dataDir))[0]
}
