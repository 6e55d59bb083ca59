import type { Kysely, Selectable } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { isUniqueViolation } from '../storage/database.ts'
import { createGroup } from '../boot/bootstrap.ts'
import { issueKey, type IssuedKey } from '../auth/keyIssuer.ts'
import type { SecretBox } from '../auth/secrets.ts'
import { httpDate } from '../auth/apiDate.ts'
import type { TenantScope } from './entitlements.ts'
import { recordChange } from '../audit/auditTrail.ts'

/**
 * Display players (D14): screens of a tenant that show the people directory (today's
 * birthdays and anniversaries, photos). The operator registers one; it gets a key of
 * its own whose only group allows people reads, so a stolen screen key reads the
 * directory and nothing else.
 */

/** A player as POST /account/read/player answers it. */
export interface PlayerRecord {
  Id: number
  Name: string
  DispGroup: string
  Location: string
  /** HTTP-date of the player's last GET /People/Read/Today; null before its first. */
  Last_Seen: string | null
}

/** The group every player key holds: people reads only. Made on the first `player add`. */
export const playerGroup = { name: 'Display players', paths: [{ path: '/People/Read/*', displayName: 'Read the people directory (display players)' }] }

type PlayerRow = Selectable<CoreTables['tenant_players']>

export function playerRecord(row: Pick<PlayerRow, 'id' | 'name' | 'disp_group' | 'location' | 'last_seen'>): PlayerRecord {
  return {
    Id: Number(row.id),
    Name: row.name,
    DispGroup: row.disp_group ?? '',
    Location: row.location ?? '',
    Last_Seen: row.last_seen === null ? null : httpDate(Number(row.last_seen)),
  }
}

/** The players of a tenant (Custno 0: of every customer of the parent), oldest first. */
export async function listPlayers(db: Kysely<CoreTables>, scope: TenantScope): Promise<(PlayerRecord & { Parent: number; Custno: number; Key_Id: number })[]> {
  const rows = await db.selectFrom('tenant_players').selectAll()
    .where('parent', '=', scope.parent)
    .$if(scope.custno !== 0, (query) => query.where('custno', '=', scope.custno))
    .orderBy('id').execute()
  return rows.map((row) => ({ ...playerRecord(row), Parent: Number(row.parent), Custno: Number(row.custno), Key_Id: Number(row.key_id) }))
}

async function playerGroupId(db: Kysely<CoreTables>): Promise<number> {
  const find = () => db.selectFrom('api_groups').select('id').where('display_name', '=', playerGroup.name).executeTakeFirst()
  const existing = await find()
  if (existing) return Number(existing.id)
  try {
    return await createGroup(db, playerGroup)
  } catch (error) {
    // Another process made it at the same moment.
    if (!isUniqueViolation(error)) throw error
    return Number((await find())!.id)
  }
}

export interface NewPlayer extends TenantScope {
  name: string
  dispGroup: string | null
  location: string | null
  /** 1 = the player's key must call over HTTPS (the default, as for any key). */
  requireHttps: number
}

export class PlayerNameTaken extends Error {}

/**
 * Registers a player and issues its key in one transaction, after `checkRoom` (the
 * tenant's MaxPlayers) ran inside it; nothing is written when either fails.
 */
export async function addPlayer(
  db: Kysely<CoreTables>,
  secrets: SecretBox,
  now: number,
  player: NewPlayer,
  checkRoom: (trx: Kysely<CoreTables>) => Promise<void>,
): Promise<IssuedKey & { playerId: number }> {
  const groupId = await playerGroupId(db)
  let playerId = 0
  // Key names are unique per parent; the customer in the name keeps two customers' "Lobby" apart.
  const keyName = `Player ${player.custno}/${player.name}`
  try {
    const key = await issueKey(db, secrets, now, {
      display_name: keyName,
      parent: player.parent,
      custno: player.custno,
      require_https: player.requireHttps,
      response_format: 'json',
    }, [groupId], {
      before: checkRoom,
      async after(trx, keyId) {
        const inserted = await trx.insertInto('tenant_players').values({
          parent: player.parent, custno: player.custno, name: player.name, disp_group: player.dispGroup, location: player.location,
          key_id: keyId, last_seen: null, created_at: now,
        }).executeTakeFirstOrThrow()
        playerId = Number(inserted.insertId)
        await recordChange(trx, now, {
          who: null, parent: player.parent, custno: player.custno, action: 'player.add', keyId,
          after: { id: playerId, name: player.name, disp_group: player.dispGroup, location: player.location },
        })
      },
    })
    return { ...key, playerId }
  } catch (error) {
    if (isUniqueViolation(error)) throw new PlayerNameTaken(await nameClash(db, player, keyName))
    throw error
  }
}

/**
 * What took the name: a player of the tenant, or a key of the parent that merely has
 * the player key's name (any key that may create keys in the parent can name one so).
 */
async function nameClash(db: Kysely<CoreTables>, player: NewPlayer, keyName: string): Promise<string> {
  const existing = await db.selectFrom('tenant_players').select('id')
    .where('parent', '=', player.parent).where('custno', '=', player.custno).where('name', '=', player.name).executeTakeFirst()
  if (existing) return `a player named '${player.name}' exists already for ${player.parent}/${player.custno}`
  const key = await db.selectFrom('api_keys').select('id').where('parent', '=', player.parent).where('display_name', '=', keyName).executeTakeFirst()
  if (key) return `a key named '${keyName}' (Id ${key.id}, not a player's) exists already in parent ${player.parent}: rename that key (POST /Api/Edit/Key) or give the player another name`
  return `a player named '${player.name}' or a key named '${keyName}' exists already for ${player.parent}/${player.custno}`
}

/** Removes a player and its key (the key stops working at once on this process, within the key cache time elsewhere). */
export async function removePlayer(db: Kysely<CoreTables>, playerId: number): Promise<{ keyId: number } | undefined> {
  return db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('tenant_players').select(['key_id', 'parent', 'custno', 'name']).where('id', '=', playerId).executeTakeFirst()
    if (!row) return undefined
    const keyId = Number(row.key_id)
    await recordChange(trx, Date.now(), { who: null, parent: Number(row.parent), custno: Number(row.custno), action: 'player.remove', keyId, before: { id: playerId, name: row.name } })
    await trx.deleteFrom('tenant_players').where('id', '=', playerId).execute()
    await trx.deleteFrom('api_key_groups').where('key_id', '=', keyId).execute()
    await trx.deleteFrom('api_keys').where('id', '=', keyId).execute()
    return { keyId }
  })
}
