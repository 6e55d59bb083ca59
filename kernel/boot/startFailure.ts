import { ConfigError, maskedUrl, type Config } from './config.ts'

/** Driver and socket codes that say the database of databaseUrl cannot be used as given (not a bug of ours). */
const databaseCodes = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ER_ACCESS_DENIED_ERROR', 'ER_DBACCESS_DENIED_ERROR', 'ER_BAD_DB_ERROR'])

/**
 * A start that fails because of a setting (a host that does not resolve, a port in use,
 * a database that refuses or does not exist) is the operator's to fix: it becomes the
 * one plain line naming the setting that config errors are (docs/deploy.md, "The service
 * log"), not a fatal line with a stack. Anything else is left as it is (null).
 */
export function startFailure(error: unknown, config: Config): ConfigError | null {
  const failure = error as NodeJS.ErrnoException & { hostname?: string }
  if (typeof failure !== 'object' || failure === null || typeof failure.code !== 'string') return null
  if (failure.syscall === 'listen') {
    return new ConfigError(`invalid setting host or port: cannot listen on ${config.host}:${config.port} (${failure.code})`)
  }
  if (failure.syscall === 'getaddrinfo' && failure.hostname === config.host) {
    return new ConfigError(`invalid setting host: '${config.host}' does not resolve (${failure.code})`)
  }
  if (config.databaseUrl && databaseCodes.has(failure.code)) {
    // The driver's message names the host or user, never the password; the URL is printed masked.
    return new ConfigError(`invalid setting databaseUrl: ${maskedUrl(config.databaseUrl)} cannot be used: ${failure.message.split('\n')[0]}`)
  }
  return null
}
