/**
 * Operator CLI (D10), on the same configuration as `npm start`:
 *   npm run --silent admin -- daycode [--uri]
 *   npm run --silent admin -- group add --name NAME [--json]
 *   npm run --silent admin -- acl add --path /Api/Read/* --name TEXT [--group ID]... [--public] [--https] [--hash 0-5] [--json]
 *   npm run --silent admin -- key bootstrap --parent N --custno N --name NAME [--json]
 *   npm run --silent admin -- key list [--json]
 *   npm run --silent admin -- master-key rotate [--json]   (scripts/admin/masterKey.ts)
 *   npm run --silent admin -- tenant set|show ...     (scripts/admin/tenant.ts)
 *   npm run --silent admin -- player add|list|remove  (scripts/admin/player.ts)
 * A running server sees ACL and group changes within `cache.keyTtlSeconds` (60 s).
 */
import { parseArgs } from 'node:util'
import { loadConfig, ConfigError } from '../kernel/boot/config.ts'
import { createKernel, type Kernel } from '../kernel/boot/kernel.ts'
import { dayCodeAt, dayCodeUri } from '../kernel/auth/dayCode.ts'
import { createGroup, readSetting } from '../kernel/boot/bootstrap.ts'
import { issueKey } from '../kernel/auth/keyIssuer.ts'
import { aclPathProblem } from '../kernel/auth/aclPath.ts'
import { isUniqueViolation } from '../kernel/storage/database.ts'
import { httpDate } from '../kernel/auth/apiDate.ts'
import { masterKey } from './admin/masterKey.ts'

const usage = `usage: npm run --silent admin -- <command>
  daycode [--uri]                                   the current day code (x-apitoday)
  group add --name NAME                             a new, empty ACL group
  acl add --path PATH --name TEXT [--group ID]...   an ACL entry, optionally granted to groups
          [--public] [--https] [--hash 0-5]
  key bootstrap --parent N --custno N --name NAME   an admin key for a tenant (the root key's groups)
  key list                                          every key, without secrets
${masterKey.usage}
${tenantUsage}
${playerUsage}
options: --json for machine-readable output`

import { UsageError } from './admin/usageError.ts'
import { tenantCommand, tenantUsage } from './admin/tenant.ts'
import { playerCommand, playerUsage } from './admin/player.ts'

function integerOption(value: string | undefined, name: string): number {
  if (value === undefined || !/^\d+$/.test(value)) throw new UsageError(`--${name} needs a whole number`)
  return Number(value)
}

async function run(kernel: Kernel, words: string[], options: Record<string, string | string[] | boolean | undefined>): Promise<unknown> {
  const { db } = kernel.database
  const now = Date.now()
  const command = words.slice(0, 2).join(' ')
  if (words[0] === 'daycode') {
    return options.uri ? dayCodeUri(kernel.daySecret, 'keygate') : dayCodeAt(kernel.daySecret, now)
  }
  if (command === 'group add') {
    if (typeof options.name !== 'string' || options.name.trim() === '') throw new UsageError('group add needs --name')
    try {
      const id = await createGroup(db, { name: options.name, paths: [] })
      return { Id: id, Display_Name: options.name }
    } catch (error) {
      if (isUniqueViolation(error)) throw new UsageError(`a group named '${options.name}' exists already`)
      throw error
    }
  }
  if (command === 'acl add') {
    const path = options.path
    if (typeof path !== 'string') throw new UsageError('acl add needs --path')
    const problem = aclPathProblem(path)
    if (problem) throw new UsageError(`--path ${path}: ${problem}`)
    if (typeof options.name !== 'string') throw new UsageError('acl add needs --name')
    const hash = options.hash === undefined ? 0 : integerOption(options.hash as string, 'hash')
    if (hash > 5) throw new UsageError('--hash is 0 (any) or 1-5 (md5, sha1, sha256, sha384, sha512)')
    const groups = ((options.group as string[] | undefined) ?? []).map((group) => integerOption(group, 'group'))
    return db.transaction().execute(async (trx) => {
      for (const groupId of groups) {
        if (!(await trx.selectFrom('api_groups').select('id').where('id', '=', groupId).executeTakeFirst())) throw new UsageError(`no group ${groupId}`)
      }
      const inserted = await trx.insertInto('api_acl').values({
        path, display_name: options.name as string, is_public: options.public ? 1 : 0, require_https: options.https ? 1 : 0, require_hash: hash,
      }).executeTakeFirstOrThrow()
      const aclId = Number(inserted.insertId)
      if (groups.length) await trx.insertInto('api_group_acl').values(groups.map((groupId) => ({ group_id: groupId, acl_id: aclId }))).execute()
      return { Id: aclId, Path: path, Groups: groups }
    })
  }
  if (command === 'key bootstrap') {
    const parent = integerOption(options.parent as string, 'parent')
    const custno = integerOption(options.custno as string, 'custno')
    if (typeof options.name !== 'string' || options.name.trim() === '') throw new UsageError('key bootstrap needs --name')
    const rootId = await readSetting(db, 'root_key_id')
    const groups = rootId === undefined ? [] : await db.selectFrom('api_key_groups').select('group_id').where('key_id', '=', Number(rootId)).execute()
    try {
      const key = await issueKey(db, kernel.secrets, now, { display_name: options.name, parent, custno, require_https: 0 }, groups.map((group) => Number(group.group_id)))
      return { Id: key.id, Api_Key: key.apiKey, Api_Secret: key.secret }
    } catch (error) {
      if (isUniqueViolation(error)) throw new UsageError(`Display Name '${options.name}' is already defined for parent ${parent}`)
      throw error
    }
  }
  if (words[0] === 'tenant') return tenantCommand(kernel, words, options)
  if (words[0] === 'player') return playerCommand(kernel, words, options)
  if (command === 'key list') {
    const rows = await db.selectFrom('api_keys').select(['id', 'api_key', 'display_name', 'parent', 'custno', 'start_date', 'end_date', 'created_by']).orderBy('id').execute()
    return rows.map((row) => ({
      Id: Number(row.id), Api_Key: row.api_key, Name: row.display_name, Parent: Number(row.parent), Custno: Number(row.custno),
      StartDate: row.start_date === null ? null : httpDate(Number(row.start_date)),
      EndDate: row.end_date === null ? null : httpDate(Number(row.end_date)),
      CreatedBy: row.created_by === null ? null : Number(row.created_by),
      Active: (row.start_date === null || Number(row.start_date) <= now) && (row.end_date === null || now < Number(row.end_date)) ? 1 : 0,
    }))
  }
  if (words[0] === 'master-key') return masterKey.run({ kernel: async () => kernel }, words.slice(1))
  throw new UsageError(usage)
}

function show(result: unknown, json: boolean): void {
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

async function main(): Promise<number> {
  let parsed
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: {
        json: { type: 'boolean' }, uri: { type: 'boolean' }, public: { type: 'boolean' }, https: { type: 'boolean' },
        name: { type: 'string' }, path: { type: 'string' }, group: { type: 'string', multiple: true }, hash: { type: 'string' },
        parent: { type: 'string' }, custno: { type: 'string' }, help: { type: 'boolean', short: 'h' },
        'max-keys': { type: 'string' }, 'max-people': { type: 'string' }, 'max-players': { type: 'string' }, timezone: { type: 'string' },
        dispgroup: { type: 'string' }, location: { type: 'string' }, id: { type: 'string' }, http: { type: 'boolean' },
      },
    })
  } catch (error) {
    console.error(`admin: ${(error as Error).message}\n${usage}`)
    return 2
  }
  if (parsed.values.help || parsed.positionals.length === 0) {
    console.error(usage)
    return parsed.values.help ? 0 : 2
  }
  let kernel: Kernel
  try {
    kernel = await createKernel({ config: loadConfig() })
  } catch (error) {
    console.error(`admin: ${error instanceof ConfigError ? error.message : (error as Error).message}`)
    return 1
  }
  try {
    if (kernel.createdRootKey) console.error(`admin: first start - the root admin key was written to ${kernel.config.dataDir}/admin-key.json`)
    show(await run(kernel, parsed.positionals, parsed.values), parsed.values.json === true)
    return 0
  } catch (error) {
    console.error(`admin: ${(error as Error).message}`)
    return error instanceof UsageError ? 2 : 1
  } finally {
    await kernel.close()
  }
}

process.exitCode = await main()
