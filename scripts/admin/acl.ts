import { aclPathProblem } from '../../kernel/auth/aclPath.ts'
import { recordChange } from '../../kernel/audit/auditTrail.ts'
import { UsageError, integerOption, noMoreWords, nameOption, serviceSeesIt, type AdminCommand, type AdminSession } from './command.ts'

/** `acl add|list|remove`: ACL entries, optionally granted to groups. */
export const acl: AdminCommand = {
  usage: `  acl add --path PATH --name TEXT [--group ID]...   an ACL entry, optionally granted to groups
          [--public] [--https] [--hash 0-5]
  acl list                                          every ACL entry and the groups granting it
  acl remove ID                                     an ACL entry, taken out of every group`,
  options: {
    path: { type: 'string' }, name: { type: 'string' }, group: { type: 'string', multiple: true },
    public: { type: 'boolean' }, https: { type: 'boolean' }, hash: { type: 'string' },
  },
  async run(session, words, options) {
    if (words[0] === 'remove') return remove(session, words)
    if (words[0] !== 'add' && words[0] !== 'list') throw new UsageError(`unknown command: acl ${words.join(' ')}`)
    noMoreWords(words, 1, `acl ${words[0]}`)
    if (words[0] === 'list') return list(session)
    const path = options.path
    if (typeof path !== 'string') throw new UsageError('acl add needs --path')
    const problem = aclPathProblem(path)
    if (problem) throw new UsageError(`--path ${path}: ${problem}`)
    const name = nameOption(options.name, 'name', 'acl add')
    const hash = options.hash === undefined ? 0 : integerOption(options.hash, 'hash')
    if (hash > 5) throw new UsageError('--hash is 0 (any) or 1-5 (md5, sha1, sha256, sha384, sha512)')
    const groups = ((options.group as string[] | undefined) ?? []).map((group) => integerOption(group, 'group'))
    const kernel = await session.kernel()
    const { db } = kernel.database
    const added = await db.transaction().execute(async (trx) => {
      for (const groupId of groups) {
        if (!(await trx.selectFrom('api_groups').select('id').where('id', '=', groupId).executeTakeFirst())) throw new UsageError(`no group ${groupId}`)
      }
      const inserted = await trx.insertInto('api_acl').values({
        path, display_name: name, is_public: options.public ? 1 : 0, require_https: options.https ? 1 : 0, require_hash: hash,
      }).executeTakeFirstOrThrow()
      const aclId = Number(inserted.insertId)
      if (groups.length) await trx.insertInto('api_group_acl').values(groups.map((groupId) => ({ group_id: groupId, acl_id: aclId }))).execute()
      // ACL entries belong to the installation: audited under tenant 0/0, by the operator (issue 16).
      await recordChange(trx, Date.now(), {
        who: null, parent: 0, custno: 0, action: 'acl.add',
        after: { id: aclId, path, display_name: name, is_public: options.public ? 1 : 0, require_https: options.https ? 1 : 0, require_hash: hash, groups },
      })
      return { Id: aclId, Path: path, Groups: groups }
    })
    kernel.services.keys.accessChanged()
    // Like every other change the CLI makes: when a running service will see it.
    console.error(`admin: ${serviceSeesIt(kernel)}`)
    return added
  },
}

async function list(session: AdminSession) {
  const { db } = (await session.kernel()).database
  const entries = await db.selectFrom('api_acl').selectAll().orderBy('id').execute()
  const grants = await db.selectFrom('api_group_acl').select(['acl_id', 'group_id']).orderBy('group_id').execute()
  return entries.map((entry) => ({
    Id: Number(entry.id), Path: entry.path, Display_Name: entry.display_name,
    Is_Public: Number(entry.is_public), Require_Https: Number(entry.require_https), Require_Hash: Number(entry.require_hash),
    Groups: grants.filter((grant) => Number(grant.acl_id) === Number(entry.id)).map((grant) => Number(grant.group_id)).join(','),
  }))
}

async function remove(session: AdminSession, words: string[]) {
  if (words.length !== 2 || !/^\d+$/.test(words[1])) throw new UsageError('usage: acl remove ID')
  const id = Number(words[1])
  const kernel = await session.kernel()
  const removed = await kernel.database.db.transaction().execute(async (trx) => {
    const entry = await trx.selectFrom('api_acl').select(['id', 'path']).where('id', '=', id).executeTakeFirst()
    if (!entry) return undefined
    const grants = await trx.selectFrom('api_group_acl').select('group_id').where('acl_id', '=', id).orderBy('group_id').execute()
    await trx.deleteFrom('api_group_acl').where('acl_id', '=', id).execute()
    await trx.deleteFrom('api_acl').where('id', '=', id).execute()
    await recordChange(trx, Date.now(), {
      who: null, parent: 0, custno: 0, action: 'acl.remove',
      before: { id, path: entry.path, groups: grants.map((grant) => Number(grant.group_id)) },
    })
    return { Id: id, Path: entry.path, Removed: 1 }
  })
  if (!removed) throw new UsageError(`no ACL entry ${id}`)
  kernel.services.keys.accessChanged()
  console.error(`admin: ${serviceSeesIt(kernel)}`)
  return removed
}
