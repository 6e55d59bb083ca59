import { isAbsolute, join, relative, resolve } from 'node:path'
import { ConfigError, maskedUrl, type Config } from './config.ts'

/** Driver codes that say databaseUrl itself is wrong: its host, user, password or database (not a bug of ours). */
const wrongDatabaseCodes = new Set(['ENOTFOUND', 'ER_ACCESS_DENIED_ERROR', 'ER_DBACCESS_DENIED_ERROR', 'ER_BAD_DB_ERROR'])
/** Socket codes that say its server did not answer: the setting may be right and the server down. */
const unreachedDatabaseCodes = new Set(['ECONNREFUSED', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH'])

/**
 * A start that fails because of a setting (a host that does not resolve, a port in use,
 * a database that refuses or does not exist) is the operator's to fix: it becomes the
 * one plain line naming the setting that config errors are (docs/deploy.md, "The service
 * log"), not a fatal line with a stack. Anything else is left as it is (null).
 */
export function startFailure(error: unknown, config: Config): ConfigError | null {
  const failure = error as NodeJS.ErrnoException & { hostname?: string }
  if (typeof failure !== 'object' || failure === null || typeof failure.code !== 'string') return null
  // A cluster worker's listen goes through the primary's handle and fails as syscall
  // 'bind' (node:net listenOnPrimaryHandle): the same port in use, the same line.
  if (failure.syscall === 'listen' || failure.syscall === 'bind') {
    // The metrics listener (metrics.port) comes up first: name it, not the service's port.
    const listenError = failure as NodeJS.ErrnoException & { port?: number }
    if (config.metrics && config.metrics.port !== 0 && listenError.port === config.metrics.port && config.metrics.port !== config.port) {
      return new ConfigError(`invalid setting metrics.port: cannot listen on ${config.metrics.host}:${config.metrics.port} (${failure.code})`)
    }
    return new ConfigError(`invalid setting host or port: cannot listen on ${config.host}:${config.port} (${failure.code})`)
  }
  if (failure.syscall === 'getaddrinfo' && failure.hostname === config.host) {
    return new ConfigError(`invalid setting host: '${config.host}' does not resolve (${failure.code})`)
  }
  if (failure.syscall === 'getaddrinfo' && config.metrics && failure.hostname === config.metrics.host) {
    return new ConfigError(`invalid setting metrics.host: '${config.metrics.host}' does not resolve (${failure.code})`)
  }
  // The data folder (or a file in it) cannot be made, opened or written: a file of that
  // name, a parent that is a file, a read-only place, another user's folder.
  if (typeof failure.path === 'string' && isInside(failure.path, config.dataDir)) {
    return new ConfigError(`invalid setting dataDir: cannot use ${resolve(config.dataDir)}: ${failure.message.split('\n')[0]}`)
  }
  if (!config.databaseUrl && (failure.code === 'SQLITE_CANTOPEN' || failure.code === 'SQLITE_READONLY')) {
    return new ConfigError(`invalid setting dataDir: cannot open ${join(resolve(config.dataDir), 'keygate.sqlite')}: ${failure.message.split('\n')[0]}`)
  }
  // The driver's message names the host or user, never the password; the URL is printed masked.
  if (config.databaseUrl && wrongDatabaseCodes.has(failure.code)) {
    return new ConfigError(`invalid setting databaseUrl: ${maskedUrl(config.databaseUrl)} cannot be used: ${failure.message.split('\n')[0]}`)
  }
  if (config.databaseUrl && unreachedDatabaseCodes.has(failure.code)) {
    return new ConfigError(`the database of databaseUrl ${maskedUrl(config.databaseUrl)} does not answer (is it running?): ${failure.message.split('\n')[0]}`)
  }
  return null
}

function isInside(path: string, folder: string): boolean {
  const inside = relative(resolve(folder), resolve(path))
  return !inside.startsWith('..') && !isAbsolute(inside)
}
