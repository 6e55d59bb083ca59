import { join } from 'node:path'
import type { ParseArgsConfig } from 'node:util'
import type { Config } from '../../kernel/boot/config.ts'
import type { Kernel } from '../../kernel/boot/kernel.ts'
import { accessStampEveryMs } from '../../kernel/cluster/accessStamp.ts'
import { nameMaxLength, nameProblem } from '../../kernel/http/nameRule.ts'

/**
 * When a running service sees a change this CLI made to keys, groups or ACL: at once
 * through Redis, else when it next reads the database's change stamp
 * (kernel/cluster/accessStamp.ts).
 */
export function serviceSeesIt(kernel: Pick<Kernel, 'config' | 'redisReachable'>): string {
  const reachable = kernel.redisReachable()
  const within = `within ${accessStampEveryMs(kernel.config.cache.keyTtlSeconds) / 1000} s`
  if (reachable === null) return `a running service sees this ${within}`
  return reachable ? 'a running service sees this at once (Redis)' : `Redis is unreachable: a running service sees this ${within} (through the database)`
}

/** A mistake in the command line: printed with the usage hint, exit 2. */
export class UsageError extends Error {}

/**
 * Refuses words after the ones a command takes (`key list 5`, `daycode now`): a typo or a
 * misplaced option is never silently dropped.
 */
export function noMoreWords(words: string[], taken: number, command: string): void {
  if (words.length > taken) throw new UsageError(`${command}: unexpected word '${words[taken]}' (options start with --)`)
}

export type OptionValues = Record<string, string | string[] | boolean | undefined>

/** What one CLI run offers its command: the config, and the kernel started on demand. */
export interface AdminSession {
  readonly config: Config
  /** The kernel on this config (migrations and first start applied), started once, closed by the dispatcher. */
  kernel(): Promise<Kernel>
}

/**
 * One command family (`key ...`, `daycode`, `export`): its usage lines, its options
 * (parsed for it alone, so families never share or clash on option names), and its
 * work. What `run` returns is printed (or as JSON with --json); text it writes itself
 * (export) it returns undefined for.
 */
export interface AdminCommand {
  usage: string
  options?: NonNullable<ParseArgsConfig['options']>
  run(session: AdminSession, words: string[], options: OptionValues): Promise<unknown>
}

export function integerOption(value: unknown, name: string): number {
  if (typeof value !== 'string' || !/^\d+$/.test(value)) throw new UsageError(`--${name} needs a whole number`)
  return Number(value)
}

/**
 * A name option (--name of a key, group, ACL entry or player): the API's own name rule
 * (kernel/http/nameRule.ts), so the CLI never stores a name the API refuses, and a bad
 * one is a usage error, never the database's.
 */
export function nameOption(value: unknown, name: string, command: string, maxLength = nameMaxLength): string {
  if (typeof value !== 'string' || value === '') throw new UsageError(`${command} needs --${name}`)
  const problem = nameProblem(value, maxLength)
  if (problem !== null) throw new UsageError(`--${name} ${problem}`)
  return value
}

/**
 * A tenant's Parent for a command that puts a key there, or sets a tenant's
 * entitlement (which no key could then use). Parent 0 belongs to the
 * installation: its changes (groups, ACL entries, master key rotations) are audited
 * under tenant 0/0, which no key may read (docs/keys.md, POST /Api/Read/Audit).
 */
export function parentOption(value: unknown, command: string): number {
  const parent = wholeNumberOption(value, 'parent')
  if (parent === 0) throw new UsageError(`${command}: --parent 0 is the installation's own (tenant 0/0 holds its audit records, which no key may read); give a Parent of 1 or more`)
  return parent
}

/** A required whole-number option (at most 15 digits: ids and tenants stay below 2^53). */
export function wholeNumberOption(value: unknown, name: string): number {
  if (typeof value !== 'string' || !/^\d{1,15}$/.test(value)) throw new UsageError(`--${name} needs a whole number`)
  return Number(value)
}

/** `SQLite /data/keygate.sqlite` or `MySQL root@127.0.0.1:3306/keygate`: never the password. */
export function databaseLabel(config: Config): string {
  if (!config.databaseUrl) return `SQLite ${join(config.dataDir, 'keygate.sqlite')}`
  const url = new URL(config.databaseUrl)
  const user = url.username ? `${decodeURIComponent(url.username)}@` : ''
  return `MySQL ${user}${url.hostname}:${url.port || 3306}${decodeURIComponent(url.pathname)}`
}
