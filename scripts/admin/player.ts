/**
 * `admin player add|list|remove` (D14): display players and their keys.
 *   player add --parent N --custno N --name X [--dispgroup G] [--location L] [--http]
 *   player list --parent N [--custno N]
 *   player remove --id N
 * `player add` prints the player's key once (`--json`: {"Id","Api_Key","Api_Secret","PlayerId"});
 * the key holds only the 'Display players' group (people reads).
 */
import type { Kernel } from '../../kernel/boot/kernel.ts'
import { addPlayer, listPlayers, PlayerNameTaken, removePlayer } from '../../kernel/tenants/players.ts'
import { oneLineProblem } from '../../kernel/http/nameRule.ts'
import { nameOption, noMoreWords, parentOption } from './command.ts'
import { UsageError, wholeNumber } from './usageError.ts'

type Options = Record<string, string | string[] | boolean | undefined>

export const playerUsage = `  player add --parent N --custno N --name X         a display player and its key (people reads only)
          [--dispgroup G] [--location L] [--http]   --http: its key may call over plain HTTP
  player list --parent N [--custno N]               a tenant's players
  player remove --id N                              a player and its key`

// tenant_players' varchar(100) columns, counted in code points as MariaDB counts them.
const textLength = 100

/** --dispgroup or --location: one line of 1-100 characters, trimmed; null when not given. */
function text(options: Options, name: string): string | null {
  const value = options[name]
  if (value === undefined) return null
  if (typeof value !== 'string' || value.trim() === '' || [...value.trim()].length > textLength) throw new UsageError(`--${name} needs a text of 1-${textLength} characters`)
  // /account/read/player answers them, also as XML: the API's text rule, on one line.
  const problem = oneLineProblem(value)
  if (problem !== null) throw new UsageError(`--${name} ${problem}`)
  return value.trim()
}

export async function playerCommand(kernel: Kernel, words: string[], options: Options): Promise<unknown> {
  const { db } = kernel.database
  if (words[1] === 'add' || words[1] === 'list') noMoreWords(words, 2, `player ${words[1]}`)
  if (words[1] === 'add') {
    const parent = parentOption(options.parent, 'player add')
    const custno = wholeNumber(options, 'custno')
    // The name rule of every key name: the player's key is named `Player <custno>/<name>`.
    const name = nameOption(options.name, 'name', 'player add', textLength)
    const player = { parent, custno, name, dispGroup: text(options, 'dispgroup'), location: text(options, 'location'), requireHttps: options.http ? 0 : 1 }
    try {
      const added = await addPlayer(db, kernel.secrets, Date.now(), player,
        (trx) => kernel.services.tenants.ensureRoom(trx, 'Players', [{ parent, custno, count: 1 }]))
      return { Id: added.id, Api_Key: added.apiKey, Api_Secret: added.secret, PlayerId: added.playerId }
    } catch (error) {
      if (error instanceof PlayerNameTaken) throw new UsageError(error.message)
      throw error
    }
  }
  if (words[1] === 'list') {
    const parent = wholeNumber(options, 'parent')
    const custno = options.custno === undefined ? 0 : wholeNumber(options, 'custno')
    return listPlayers(db, { parent, custno })
  }
  if (words[1] === 'remove') {
    const id = wholeNumber(options, 'id')
    const removed = await removePlayer(db, id)
    if (!removed) throw new UsageError(`no player ${id}`)
    kernel.services.keys.changed(removed.keyId)
    return { Id: id, Removed: 1, Key_Id: removed.keyId }
  }
  throw new UsageError(`player ${words[1] ?? ''}: expected add, list or remove\n${playerUsage}`)
}
