import { readSetting } from '../../kernel/boot/bootstrap.ts'
import { issueKey } from '../../kernel/auth/keyIssuer.ts'
import { isUniqueViolation } from '../../kernel/storage/database.ts'
import { httpDate } from '../../kernel/auth/apiDate.ts'
import type { KeyRecord } from '../../kernel/auth/keyAdministration.ts'
import { UsageError, integerOption, noMoreWords, serviceSeesIt, nameOption, parentOption, wholeNumberOption, type AdminCommand } from './command.ts'
import { recordChange } from '../../kernel/audit/auditTrail.ts'
import { keyChangeEvent } from '../../kernel/events/keyEvents.ts'

function keyRow(row: KeyRecord, now: number) {
  return {
    Id: Number(row.id), Api_Key: row.api_key, Name: row.display_name, Parent: Number(row.parent), Custno: Number(row.custno),
    StartDate: row.start_date === null ? null : httpDate(Number(row.start_date)),
    EndDate: row.end_date === null ? null : httpDate(Number(row.end_date)),
    CreatedBy: row.created_by === null ? null : Number(row.created_by),
    Active: (row.start_date === null || Number(row.start_date) <= now) && (row.end_date === null || now < Number(row.end_date)) ? 1 : 0,
  }
}

function keyId(words: string[], command: string): number {
  if (words.length !== 2 || !/^\d+$/.test(words[1])) throw new UsageError(`usage: key ${command} ID`)
  return Number(words[1])
}

/** `key bootstrap|list|show|disable|enable`: keys, always through the kernel. */
export const key: AdminCommand = {
  usage: `  key bootstrap --parent N --custno N --name NAME   an admin key for a tenant (the root key's groups)
  key list [--parent N] [--custno N]                every key (of that tenant), without secrets
  key show ID                                       one key and its groups
  key disable ID | key enable ID                    EndDate now (as the API's disable) | no EndDate`,
  options: { parent: { type: 'string' }, custno: { type: 'string' }, name: { type: 'string' } },
  async run(session, words, options) {
    // A bad option or a stray word is refused before the database is opened.
    if (words[0] === 'bootstrap' || words[0] === 'list') noMoreWords(words, 1, `key ${words[0]}`)
    // An option a subcommand does not take is refused, never silently dropped (a `key list
    // --parent 7` that listed every tenant's keys would mislead).
    if (words[0] !== 'bootstrap' && options.name !== undefined) throw new UsageError(`key ${words[0]}: --name is not an option of it`)
    if (words[0] !== 'bootstrap' && words[0] !== 'list' && (options.parent !== undefined || options.custno !== undefined)) {
      throw new UsageError(`key ${words[0]}: --parent and --custno are not options of it`)
    }
    const listed = words[0] === 'list'
      ? { parent: options.parent === undefined ? undefined : wholeNumberOption(options.parent, 'parent'), custno: options.custno === undefined ? undefined : wholeNumberOption(options.custno, 'custno') }
      : null
    const wanted = words[0] === 'bootstrap'
      ? { parent: parentOption(options.parent, 'key bootstrap'), custno: integerOption(options.custno, 'custno'), name: nameOption(options.name, 'name', 'key bootstrap') }
      : null
    const kernel = await session.kernel()
    const { db } = kernel.database
    const now = Date.now()
    if (wanted) {
      const { parent, custno, name } = wanted
      const rootId = await readSetting(db, 'root_key_id')
      const groups = rootId === undefined ? [] : await kernel.services.keys.groupsOf(Number(rootId))
      try {
        const groupIds = groups.map((group) => group.Id)
        const fields = { display_name: name, parent, custno, require_https: 0 }
        const issued = await issueKey(db, kernel.secrets, now, fields, groupIds, {
          after: (trx, keyId) => recordChange(trx, now, { who: null, parent, custno, action: 'key.create', keyId, after: { ...fields, groups: groupIds } }),
        })
        return { Id: issued.id, Api_Key: issued.apiKey, Api_Secret: issued.secret }
      } catch (error) {
        if (isUniqueViolation(error)) throw new UsageError(`Display Name '${name}' is already defined for parent ${parent}`)
        throw error
      }
    }
    if (words[0] === 'list') {
      const rows = await db.selectFrom('api_keys').selectAll()
        .$if(listed?.parent !== undefined, (query) => query.where('parent', '=', listed!.parent!))
        .$if(listed?.custno !== undefined, (query) => query.where('custno', '=', listed!.custno!))
        .orderBy('id').execute()
      return rows.map((row) => keyRow(row, now))
    }
    if (words[0] === 'show') {
      const id = keyId(words, 'show')
      const row = await db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst()
      if (!row) throw new UsageError(`no key ${id}`)
      const groups = await kernel.services.keys.groupsOf(id)
      return { ...keyRow(row, now), Groups: groups.map((group) => `${group.Id} ${group.Display_Name}`) }
    }
    if (words[0] === 'disable' || words[0] === 'enable') {
      const id = keyId(words, words[0])
      // The change and its audit record in one transaction (issue 16).
      const outcome = await db.transaction().execute(async (trx) => {
        const before = await trx.selectFrom('api_keys').select(['id', 'display_name', 'parent', 'custno', 'end_date']).where('id', '=', id).executeTakeFirst()
        if (!before) return 'missing'
        const endedAt = before.end_date === null ? null : Number(before.end_date)
        // A key that has ended keeps the date it ended (interface 3); an enabled key stays as it is. Nothing changes, nothing is recorded.
        if (words[0] === 'disable' ? endedAt !== null && endedAt <= now : endedAt === null) return 'unchanged'
        const endDate = words[0] === 'disable' ? now : null
        await trx.updateTable('api_keys').set({ end_date: endDate, updated_at: now }).where('id', '=', id).execute()
        await recordChange(trx, now, {
          who: null, parent: Number(before.parent), custno: Number(before.custno), action: `key.${words[0]}`, keyId: id,
          before: { end_date: before.end_date === null ? null : Number(before.end_date) }, after: { end_date: endDate },
        })
        // The same event as the API's edit (issue 17): key.disabled when it ends a key in use, else key.changed.
        await kernel.services.events.emit(trx, keyChangeEvent(before, { end_date: endDate }, { end_date: endDate }, now))
        return 'changed'
      })
      if (outcome === 'missing') throw new UsageError(`no key ${id}`)
      if (outcome === 'changed') {
        kernel.services.keys.changed(id)
        console.error(`admin: ${serviceSeesIt(kernel)}`)
      } else {
        console.error(`admin: key ${id} is already ${words[0] === 'disable' ? 'disabled' : 'enabled'}; nothing changed`)
      }
      const row = await db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
      return keyRow(row, now)
    }
    throw new UsageError(`unknown command: key ${words.join(' ')}`)
  },
}
