import { aclPathProblem } from '../../kernel/auth/aclPath.ts'
import { UsageError, integerOption, type AdminCommand } from './command.ts'

/** `acl add`: ACL entries, optionally granted to groups. */
export const acl: AdminCommand = {
  usage: `  acl add --path PATH --name TEXT [--group ID]...   an ACL entry, optionally granted to groups
          [--public] [--https] [--hash 0-5]`,
  options: {
    path: { type: 'string' }, name: { type: 'string' }, group: { type: 'string', multiple: true },
    public: { type: 'boolean' }, https: { type: 'boolean' }, hash: { type: 'string' },
  },
  async run(session, words, options) {
    if (words[0] !== 'add') throw new UsageError(`unknown command: acl ${words.join(' ')}`)
    const path = options.path
    if (typeof path !== 'string') throw new UsageError('acl add needs --path')
    const problem = aclPathProblem(path)
    if (problem) throw new UsageError(`--path ${path}: ${problem}`)
    if (typeof options.name !== 'string') throw new UsageError('acl add needs --name')
    const name = options.name
    const hash = options.hash === undefined ? 0 : integerOption(options.hash, 'hash')
    if (hash > 5) throw new UsageError('--hash is 0 (any) or 1-5 (md5, sha1, sha256, sha384, sha512)')
    const groups = ((options.group as string[] | undefined) ?? []).map((group) => integerOption(group, 'group'))
    const { db } = (await session.kernel()).database
    return db.transaction().execute(async (trx) => {
      for (const groupId of groups) {
        if (!(await trx.selectFrom('api_groups').select('id').where('id', '=', groupId).executeTakeFirst())) throw new UsageError(`no group ${groupId}`)
      }
      const inserted = await trx.insertInto('api_acl').values({
        path, display_name: name, is_public: options.public ? 1 : 0, require_https: options.https ? 1 : 0, require_hash: hash,
      }).executeTakeFirstOrThrow()
      const aclId = Number(inserted.insertId)
      if (groups.length) await trx.insertInto('api_group_acl').values(groups.map((groupId) => ({ group_id: groupId, acl_id: aclId }))).execute()
      return { Id: aclId, Path: path, Groups: groups }
    })
  },
}
