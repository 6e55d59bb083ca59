import { writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import type { Kysely, Transaction } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { isUniqueViolation } from '../storage/database.ts'
import { makeFolder } from '../storage/makeFolder.ts'
import { adminGroupName, type DefaultGroup, type Plugin } from '../plugin.ts'
import type { SecretBox } from '../auth/secrets.ts'
import { newDaySecret } from '../auth/dayCode.ts'
import { issueKey, type IssuedKey } from '../auth/keyIssuer.ts'

const rootKeySetting = 'root_key_id'

export async function readSetting(db: Kysely<CoreTables>, name: string): Promise<string | undefined> {
  const row = await db.selectFrom('kernel_settings').select('value').where('name', '=', name).executeTakeFirst()
  return row?.value
}

/** Writes a setting unless another process wrote it first; returns the value that holds. */
export async function settleSetting(db: Kysely<CoreTables>, name: string, value: string): Promise<string> {
  try {
    await db.insertInto('kernel_settings').values({ name, value }).execute()
    return value
  } catch (error) {
    if (!isUniqueViolation(error)) throw error
    return (await readSetting(db, name))!
  }
}

/** The master key in use is not the one this database's secrets were sealed under. */
export class MasterKeyMismatch extends Error {
  constructor() {
    super(
      'the master key does not open this database (its secrets were sealed under another key: ' +
        'set MASTER_KEY, or put back the dataDir/master.key, that this database was created with; ' +
        'after an `admin master-key rotate` that did not report success, set MASTER_KEY to the value it printed)',
    )
  }
}

/** The server's day-code secret (D5): made at first start, kept sealed in the database. */
export async function loadDaySecret(db: Kysely<CoreTables>, secrets: SecretBox): Promise<Buffer> {
  const stored = (await readSetting(db, 'day_secret')) ?? (await settleSetting(db, 'day_secret', secrets.seal(newDaySecret().toString('hex'), 'day-secret')))
  // The first sealed value opened at start: an AES-GCM failure here means the wrong key.
  let opened: string
  try {
    opened = secrets.open(stored, 'day-secret')
  } catch {
    throw new MasterKeyMismatch()
  }
  return Buffer.from(opened, 'hex')
}

/** The first start's root key and the file its credentials were written to. */
export interface RootKey extends IssuedKey {
  file: string
}

/**
 * Writes the root key's credentials to admin-key.json, or, when that exists (a second
 * database bootstrapped into the same folder), to admin-key-2.json, -3, ...: an
 * existing key file is never overwritten. Returns the path written.
 */
export function writeRootKeyFile(dataDir: string, root: IssuedKey): string {
  makeFolder(dataDir)
  const content = JSON.stringify({ Id: root.id, Api_Key: root.apiKey, Api_Secret: root.secret }, null, 2) + '\n'
  for (let index = 1; ; index++) {
    const file = join(dataDir, index === 1 ? 'admin-key.json' : `admin-key-${index}.json`)
    try {
      // 'wx' fails when the file exists, so two starts never share or overwrite one.
      writeFileSync(file, content, { mode: 0o600, flag: 'wx' })
      return file
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
  }
}

/** Creates one group and its ACL entries; returns the group id. */
export async function createGroup(db: Kysely<CoreTables>, group: DefaultGroup): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const inserted = await trx.insertInto('api_groups').values({ display_name: group.name }).executeTakeFirstOrThrow()
    const groupId = Number(inserted.insertId)
    await addEntries(trx, groupId, group.paths)
    return groupId
  })
}

/**
 * The name a plugin's new default group is made under: its own, or, when a group of
 * that name exists (an operator's, or one made earlier, in this start too), the name
 * with the plugin's in brackets ("Account readers (plugin account)", then "... 2", ...).
 */
async function freeGroupName(db: Kysely<CoreTables>, name: string, plugin: string): Promise<string> {
  const taken = async (candidate: string) => (await db.selectFrom('api_groups').select('id').where('display_name', '=', candidate).executeTakeFirst()) !== undefined
  if (!(await taken(name))) return name
  for (let index = 1; ; index++) {
    const candidate = `${name} (plugin ${plugin}${index === 1 ? '' : ` ${index}`})`
    if (!(await taken(candidate))) return candidate
  }
}

/**
 * One new default group of `plugin`; returns its id. The admin group's paths join that
 * group when it exists. Any other never joins a group of its name that someone else
 * made (an operator's, another plugin's): every key holding that group would gain the
 * plugin's paths. It is made under a name of its own instead.
 */
async function makeDefaultGroup(db: Kysely<CoreTables>, plugin: string, group: DefaultGroup): Promise<number> {
  if (group.name !== adminGroupName) return createGroup(db, { ...group, name: await freeGroupName(db, group.name, plugin) })
  const admin = await db.selectFrom('api_groups').select('id').where('display_name', '=', adminGroupName).executeTakeFirst()
  return admin ? joinGroup(db, Number(admin.id), group) : createGroup(db, group)
}

/**
 * A default group named `adminGroupName`, which the keys plugin brings: this plugin's
 * paths join it, those it lacks. Returns its id.
 */
async function joinGroup(db: Kysely<CoreTables>, groupId: number, group: DefaultGroup): Promise<number> {
  await db.transaction().execute(async (trx) => {
    const held = new Set((await trx.selectFrom('api_group_acl').innerJoin('api_acl', 'api_acl.id', 'api_group_acl.acl_id')
      .select('api_acl.path').where('api_group_acl.group_id', '=', groupId).execute()).map((row) => row.path))
    await addEntries(trx, groupId, group.paths.filter((entry) => !held.has(entry.path)))
  })
  return groupId
}

async function addEntries(trx: Transaction<CoreTables>, groupId: number, paths: DefaultGroup['paths']): Promise<void> {
  for (const entry of paths) {
    const acl = await trx
      .insertInto('api_acl')
      .values({
        path: entry.path,
        display_name: entry.displayName,
        is_public: entry.isPublic ?? 0,
        require_https: entry.requireHttps ?? 0,
        require_hash: entry.requireHash ?? 0,
      })
      .executeTakeFirstOrThrow()
    await trx.insertInto('api_group_acl').values({ group_id: groupId, acl_id: Number(acl.insertId) }).execute()
  }
}

/**
 * The setting that remembers one default group was made (hashed: a group's name may
 * be longer than a setting's).
 */
function defaultGroupMarker(plugin: string, group: string): string {
  return `default_group_${createHash('sha256').update(`${plugin}\u0000${group}`).digest('hex').slice(0, 32)}`
}

function markGroupMade(db: Kysely<CoreTables>, plugin: string, group: string, now: number): Promise<string> {
  return settleSetting(db, defaultGroupMarker(plugin, group), JSON.stringify({ plugin, group, at: new Date(now).toISOString() }))
}

/**
 * Which default groups of a plugin to create now. Each group is created once: a setting
 * per group remembers it, so an operator's later edits stand, and a group a plugin adds
 * in a later version is created on an installation that has the plugin's older groups.
 * Installations from before the per-group settings have only the plugin's setting: their
 * groups that exist by name are recorded as made (and left as they are), the others are new.
 */
async function groupsToCreate(db: Kysely<CoreTables>, plugin: Plugin, now: number): Promise<DefaultGroup[]> {
  const pluginMarker = `groups_of_${plugin.name}`
  const madeBefore = (await readSetting(db, pluginMarker)) !== undefined
  const created: DefaultGroup[] = []
  for (const group of plugin.defaultGroups ?? []) {
    const marker = defaultGroupMarker(plugin.name, group.name)
    if ((await readSetting(db, marker)) !== undefined) continue
    if (madeBefore && (await db.selectFrom('api_groups').select('id').where('display_name', '=', group.name).executeTakeFirst())) {
      await markGroupMade(db, plugin.name, group.name, now)
      continue
    }
    created.push(group)
  }
  return created
}

async function holdGroup(db: Kysely<CoreTables>, keyId: number, groupId: number): Promise<void> {
  await db.insertInto('api_key_groups').values({ key_id: keyId, group_id: groupId }).execute()
    .catch((error) => { if (!isUniqueViolation(error)) throw error })
}

/** A new default group's `alsoHeldBy`: every key holding the group of that name holds the new one too. */
async function giveToHoldersOf(db: Kysely<CoreTables>, holdersGroup: string, groupId: number): Promise<void> {
  const holders = await db.selectFrom('api_key_groups').innerJoin('api_groups', 'api_groups.id', 'api_key_groups.group_id')
    .select('api_key_groups.key_id').where('api_groups.display_name', '=', holdersGroup).execute()
  for (const holder of holders) await holdGroup(db, Number(holder.key_id), groupId)
}

/**
 * First start (D10) and plugins enabled later: each enabled plugin's default groups are
 * created once (see groupsToCreate) and given to the root admin key, and to no other
 * key but the holders of its `alsoHeldBy` group. On an empty database the root admin key is made as well.
 */
export async function bootstrap(
  db: Kysely<CoreTables>,
  secrets: SecretBox,
  plugins: readonly Plugin[],
  options: { dataDir: string; now: number },
): Promise<RootKey | null> {
  const newGroupIds: number[] = []
  for (const plugin of plugins) {
    if (!plugin.defaultGroups?.length) continue
    const groups = await groupsToCreate(db, plugin, options.now)
    for (const group of groups) {
      const groupId = await makeDefaultGroup(db, plugin.name, group)
      newGroupIds.push(groupId)
      if (group.alsoHeldBy !== undefined) await giveToHoldersOf(db, group.alsoHeldBy, groupId)
      // Remembered by the name the plugin declares, under whichever name it was made.
      await markGroupMade(db, plugin.name, group.name, options.now)
    }
    if (groups.length > 0) await settleSetting(db, `groups_of_${plugin.name}`, new Date(options.now).toISOString())
  }

  const rootKeyId = await readSetting(db, rootKeySetting)
  if (rootKeyId !== undefined) {
    for (const groupId of newGroupIds) await holdGroup(db, Number(rootKeyId), groupId)
    return null
  }
  const anyKey = await db.selectFrom('api_keys').select('id').limit(1).executeTakeFirst()
  if (anyKey) return null

  const allGroups = await db.selectFrom('api_groups').select('id').execute()
  const root = await issueKey(db, secrets, options.now, {
    display_name: 'Root administrator',
    parent: 1,
    custno: 0,
    // The first key must work over plain HTTP on localhost, where the service starts.
    require_https: 0,
    response_format: 'json',
  }, allGroups.map((group) => Number(group.id)))
  await settleSetting(db, rootKeySetting, String(root.id))
  return { ...root, file: writeRootKeyFile(options.dataDir, root) }
}
