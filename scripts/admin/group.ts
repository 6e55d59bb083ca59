import { createGroup } from '../../kernel/boot/bootstrap.ts'
import { isUniqueViolation } from '../../kernel/storage/database.ts'
import { UsageError, textOption, type AdminCommand } from './command.ts'

/** `group add`: ACL groups. */
export const group: AdminCommand = {
  usage: '  group add --name NAME                             a new, empty ACL group',
  options: { name: { type: 'string' } },
  async run(session, words, options) {
    const { db } = (await session.kernel()).database
    if (words[0] === 'add') {
      const name = textOption(options.name, 'name', 'group add')
      try {
        const id = await createGroup(db, { name, paths: [] })
        return { Id: id, Display_Name: name }
      } catch (error) {
        if (isUniqueViolation(error)) throw new UsageError(`a group named '${name}' exists already`)
        throw error
      }
    }
    throw new UsageError(`unknown command: group ${words.join(' ')}`)
  },
}
