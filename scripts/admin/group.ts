import { recordChange } from '../../kernel/audit/auditTrail.ts'
import { isUniqueViolation } from '../../kernel/storage/database.ts'
import { readSetting } from '../../kernel/boot/bootstrap.ts'
import { UsageError, noMoreWords, serviceSeesIt, nameOption, type AdminCommand } from './command.ts'

/** `group add|list`: ACL groups. */
export const group: AdminCommand = {
  usage: `  group add --name NAME                             a new, empty ACL group, held by the root admin key
  group list                                        every group, its ACL paths and how many keys hold it`,
  options: { name: { type: 'string' } },
  async run(session, words, options) {
    // A bad name or a stray word is refused before the database is opened.
    if (words[0] === 'add' || words[0] === 'list') noMoreWords(words, 1, `group ${words[0]}`)
    const name = words[0] === 'add' ? nameOption(options.name, 'name', 'group add') : ''
    const kernel = await session.kernel()
    const { db } = kernel.database
    if (words[0] === 'add') {
      const rootSetting = await readSetting(db, 'root_key_id')
      const rootId = rootSetting === undefined ? null : Number(rootSetting)
      try {
        // The group, its audit record and the root key's hold on it in one transaction
        // (issue 16); groups belong to the installation (tenant 0/0). The root key holds
        // it so that it can be given to keys at all: a key assigns only groups it holds
        // (D9), and no key above the root could hand this one down.
        const id = await db.transaction().execute(async (trx) => {
          const inserted = await trx.insertInto('api_groups').values({ display_name: name }).executeTakeFirstOrThrow()
          const groupId = Number(inserted.insertId)
          await recordChange(trx, Date.now(), { who: null, parent: 0, custno: 0, action: 'group.add', after: { id: groupId, display_name: name } })
          if (rootId !== null) await trx.insertInto('api_key_groups').values({ key_id: rootId, group_id: groupId }).execute()
          return groupId
        })
        if (rootId !== null) {
          kernel.services.keys.changed(rootId)
          console.error(`admin: the root admin key (Id ${rootId}) holds the group; it gives it to keys with POST /Api/Create/Key or /Api/Edit/Key once ACL entries are granted to it (acl add --group ${id}); ${serviceSeesIt(kernel)}`)
        }
        return { Id: id, Display_Name: name }
      } catch (error) {
        if (isUniqueViolation(error)) throw new UsageError(`a group named '${name}' exists already`)
        throw error
      }
    }
    if (words[0] === 'list') {
      const groups = await db.selectFrom('api_groups').select(['id', 'display_name']).orderBy('id').execute()
      const paths = await db.selectFrom('api_group_acl as ga').innerJoin('api_acl as a', 'a.id', 'ga.acl_id').select(['ga.group_id as groupId', 'a.path as path']).orderBy('a.id').execute()
      const holders = await db.selectFrom('api_key_groups').select(['group_id', (eb) => eb.fn.countAll<number>().as('keys')]).groupBy('group_id').execute()
      return groups.map((row) => ({
        Id: Number(row.id),
        Display_Name: row.display_name,
        Keys: Number(holders.find((holder) => Number(holder.group_id) === Number(row.id))?.keys ?? 0),
        Paths: paths.filter((path) => Number(path.groupId) === Number(row.id)).map((path) => path.path).join(','),
      }))
    }
    throw new UsageError(`unknown command: group ${words.join(' ')}`)
  },
}
