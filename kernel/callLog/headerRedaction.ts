/**
 * Which request headers the call log stores as `[redacted]` (issue 12, item 5): every
 * header that carries a credential. Decided once, at start, from config
 * `log.redactHeaders`; checking a header is then one lookup, and the pattern test runs
 * once per header name (clients send the same few names on every call).
 */

/** Always redacted: our own credentials (D2), cookies, and proxy credentials. */
const credentialHeaders = ['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-apikey', 'x-apidate', 'x-apihmac', 'x-apitoday']

/**
 * Any other header whose name says it carries a credential: every kind of
 * Authorization (`X-Forwarded-Authorization`, ...), cookies, tokens (`X-Auth-Token`,
 * `X-CSRF-Token`), API keys (`X-API-Key`, `Api-Key`), secrets, passwords, sessions.
 */
const credentialName = /authorization|cookie|token|secret|passw|api-?key|session|credential/

/** Header names whose decision is remembered; past it, names are tested each time (a client inventing names grows nothing). */
const rememberedNames = 256

/** A test of a lower-case header name: true when its value must not be stored. */
export function headerRedaction(configured: readonly string[]): (lowerCaseName: string) => boolean {
  const names = new Set([...credentialHeaders, ...configured.map((name) => name.toLowerCase())])
  const decided = new Map<string, boolean>()
  return (lowerCaseName) => {
    let redacted = decided.get(lowerCaseName)
    if (redacted === undefined) {
      redacted = names.has(lowerCaseName) || credentialName.test(lowerCaseName)
      if (decided.size < rememberedNames) decided.set(lowerCaseName, redacted)
    }
    return redacted
  }
}
