/**
 * Operator CLI (D10), on the same configuration as `npm start`:
 *   npm run --silent admin -- <command> [options] [--json]
 * A small dispatcher: each command family lives in its own module under scripts/admin/
 * (an AdminCommand) and is named once in `commands` below.
 * A running server sees ACL and group changes within `cache.keyTtlSeconds` (60 s).
 */
import { parseArgs } from 'node:util'
import { basename } from 'node:path'
import { loadConfig, ConfigError, type Config } from '../kernel/boot/config.ts'
import { createKernel, type Kernel } from '../kernel/boot/kernel.ts'
import { createLogger } from '../kernel/observe/logger.ts'
import { serviceLogLines } from './admin/serviceLogLines.ts'
import { UsageError, databaseLabel, type AdminCommand, type AdminSession } from './admin/command.ts'
import { daycode } from './admin/daycode.ts'
import { group } from './admin/group.ts'
import { acl } from './admin/acl.ts'
import { key } from './admin/key.ts'
import { rootKey } from './admin/rootKey.ts'
import { exportCommand } from './admin/export.ts'
import { importCommand } from './admin/import.ts'
import { backup } from './admin/backup.ts'
import { exitQuietlyOnClosedPipe } from './closedPipe.ts'
import { masterKey } from './admin/masterKey.ts'
import { tenantCommand, tenantUsage } from './admin/tenant.ts'
import { playerCommand, playerUsage } from './admin/player.ts'

const tenant: AdminCommand = {
  usage: tenantUsage,
  options: { parent: { type: 'string' }, custno: { type: 'string' }, 'max-keys': { type: 'string' }, 'max-people': { type: 'string' }, 'max-players': { type: 'string' }, timezone: { type: 'string' }, 'max-hits': { type: 'string' } },
  run: async (session, words, options) => tenantCommand(await session.kernel(), ['tenant', ...words], options),
}

const player: AdminCommand = {
  usage: playerUsage,
  options: { parent: { type: 'string' }, custno: { type: 'string' }, name: { type: 'string' }, dispgroup: { type: 'string' }, location: { type: 'string' }, id: { type: 'string' }, http: { type: 'boolean' } },
  run: async (session, words, options) => playerCommand(await session.kernel(), ['player', ...words], options),
}

const commands: Record<string, AdminCommand> = {
  daycode,
  group,
  acl,
  key,
  'root-key': rootKey,
  export: exportCommand,
  import: importCommand,
  backup,
  'master-key': masterKey,
  tenant,
  player,
}

const usage = `usage: npm run --silent admin -- <command>
${Object.values(commands).map((command) => command.usage).join('\n')}
options: --json for machine-readable output`

function show(result: unknown, json: boolean): void {
  if (result === undefined) return
  if (json || typeof result !== 'object' || result === null) {
    console.log(typeof result === 'string' && !json ? result : JSON.stringify(result, null, json ? undefined : 2))
    return
  }
  if (Array.isArray(result)) {
    for (const row of result) console.log(Object.entries(row).map(([name, value]) => `${name}=${value}`).join('  '))
    return
  }
  for (const [name, value] of Object.entries(result)) console.log(`${name}: ${Array.isArray(value) ? value.join(',') : value}`)
}

function session(config: Config): AdminSession & { close(): Promise<void> } {
  let started: Promise<Kernel> | null = null
  return {
    config,
    kernel() {
      // The service log goes to stderr, as lines for a person: stdout carries the command's answer (a day code, an export).
      started ??= createKernel({ config, logger: createLogger({ destination: serviceLogLines((text) => process.stderr.write(text)) }) }).then((kernel) => {
        if (kernel.createdRootKey) {
          console.error(`admin: first start - the root admin key was written to ${kernel.createdRootKey.file}`)
          // The folder's admin-key.json belongs to another database: most likely the service
          // runs on MySQL and this run was not given its DATABASE_URL (its day code would be wrong).
          if (basename(kernel.createdRootKey.file) !== 'admin-key.json') {
            console.error(`admin: warning: ${config.dataDir} already holds the admin key of another database; this run made a new, empty one (${databaseLabel(config)}). Is DATABASE_URL set as for the service?`)
          }
        }
        return kernel
      })
      return started
    },
    async close() {
      if (started) await (await started.catch(() => null))?.close()
    },
  }
}

async function main(argv: string[]): Promise<number> {
  // `--json` is a global option (D10): accepted before the command too (`admin -- --json key list`).
  const leadingJson = argv[0] === '--json'
  const [name, ...rest] = leadingJson ? argv.slice(1) : argv
  if (name === undefined || name === '--help' || name === '-h') {
    console.error(usage)
    return name === undefined ? 2 : 0
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined
  if (!command) {
    console.error(`admin: unknown command '${name}'\n${usage}`)
    return 2
  }
  let parsed
  try {
    parsed = parseArgs({ args: rest, allowPositionals: true, options: { ...command.options, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } })
  } catch (error) {
    console.error(`admin: ${(error as Error).message}\n${usage}`)
    return 2
  }
  if (parsed.values.help) {
    console.error(`usage: npm run --silent admin -- ${name} ...\n${command.usage}`)
    return 0
  }
  let config: Config
  try {
    config = loadConfig()
  } catch (error) {
    console.error(`admin: ${error instanceof ConfigError ? error.message : (error as Error).message}`)
    return 1
  }
  // Which database this run reads or changes: the day code, keys and logs belong to one.
  console.error(`keygate admin: ${databaseLabel(config)}`)
  const current = session(config)
  try {
    show(await command.run(current, parsed.positionals, parsed.values), leadingJson || parsed.values.json === true)
    return 0
  } catch (error) {
    console.error(`admin: ${(error as Error).message}`)
    return error instanceof UsageError ? 2 : 1
  } finally {
    await current.close()
  }
}

exitQuietlyOnClosedPipe('admin')
process.exitCode = await main(process.argv.slice(2))
