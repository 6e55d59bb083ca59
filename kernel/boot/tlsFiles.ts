import { readFileSync } from 'node:fs'
import { createSecureContext } from 'node:tls'

/** What is wrong with config `tls`: the setting to name and why, or null when it can serve. */
export interface TlsProblem {
  setting: 'tls.certFile' | 'tls.keyFile'
  detail: string
}

/**
 * Reads both files and builds the secure context the HTTPS server will, once, at config
 * load: a folder, an unreadable file, a file that is not PEM or a key of another
 * certificate would otherwise stop the start only after the migrations, with a stack.
 */
export function tlsFilesProblem(tls: { certFile: string; keyFile: string }): TlsProblem | null {
  const contents: Partial<Record<'certFile' | 'keyFile', Buffer>> = {}
  for (const name of ['certFile', 'keyFile'] as const) {
    try {
      contents[name] = readFileSync(tls[name])
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      const detail = code === 'ENOENT' ? `the file ${tls[name]} does not exist` : `the file ${tls[name]} cannot be read (${code ?? 'unknown error'})`
      return { setting: `tls.${name}`, detail }
    }
  }
  try {
    createSecureContext({ cert: contents.certFile })
  } catch (error) {
    return { setting: 'tls.certFile', detail: `${tls.certFile} does not hold a PEM certificate (${reason(error)})` }
  }
  try {
    createSecureContext({ key: contents.keyFile })
  } catch (error) {
    return { setting: 'tls.keyFile', detail: `${tls.keyFile} does not hold a PEM private key (${reason(error)})` }
  }
  try {
    createSecureContext({ cert: contents.certFile, key: contents.keyFile })
  } catch (error) {
    return { setting: 'tls.keyFile', detail: `${tls.keyFile} is not the private key of ${tls.certFile} (${reason(error)})` }
  }
  return null
}

/** OpenSSL's reason alone ("no start line", "key values mismatch"): never the file's bytes. */
function reason(error: unknown): string {
  return (error as { reason?: string }).reason ?? (error as Error).message ?? String(error)
}
