/**
 * The operator CLI for tenants and players (D14): `admin tenant set|show` and
 * `admin player add|list|remove`, run as the operator runs them, against a running
 * service's database; the printed player key works at once and reads people only.
 */
import t from 'tap'
import { startService } from './helpers/service.ts'
import { adminOn as admin } from './helpers/adminCli.ts'

// SQLite only: each command is a process start (seconds); the kernel code behind them is
// tested on both databases by tenant-limits, account-read and people-today.
t.test('admin tenant and admin player', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })

  const set = await admin(service, 'tenant', 'set', '--parent', '5', '--custno', '0', '--max-players', '1', '--max-keys', '3', '--timezone', 'Europe/Oslo', '--json')
  t.equal(set.code, 0, set.stderr)
  t.same(JSON.parse(set.stdout), { Parent: 5, Custno: 0, MaxKeys: 3, MaxPeople: null, MaxPlayers: 1, TimeZone: 'Europe/Oslo', MaxHits: null, EffectiveTimeZone: 'Europe/Oslo', Keys: 0, People: 0, Players: 0 })
  const badZone = await admin(service, 'tenant', 'set', '--parent', '5', '--custno', '0', '--timezone', 'Mars/Olympus_Mons')
  t.equal(badZone.code, 2)
  t.match(badZone.stderr, 'is not an IANA time zone')
  const badMax = await admin(service, 'tenant', 'set', '--parent', '5', '--custno', '0', '--max-keys', 'many')
  t.equal(badMax.code, 2)
  t.match(badMax.stderr, '--max-keys needs a whole number or none')
  t.equal((await admin(service, 'tenant', 'set', '--parent', '5', '--custno', '0')).code, 2, 'nothing to set')

  const added = await admin(service, 'player', 'add', '--parent', '5', '--custno', '0', '--name', 'Lobby', '--dispgroup', 'Front', '--location', 'Hall', '--http', '--json')
  t.equal(added.code, 0, added.stderr)
  const player = JSON.parse(added.stdout)
  t.same(Object.keys(player), ['Id', 'Api_Key', 'Api_Secret', 'PlayerId'])
  t.match(player.Api_Key, /^kg_/)
  const full = await admin(service, 'player', 'add', '--parent', '5', '--custno', '0', '--name', 'Garage', '--json')
  t.equal(full.code, 1)
  t.match(full.stderr, 'Error: Tenant limit reached (MaxPlayers 1).')

  const key = { id: player.Id, apiKey: player.Api_Key, secret: player.Api_Secret }
  t.equal((await service.call('GET', '/People/Read/Today', { key })).status, 200, 'the printed key works at once')
  t.equal((await service.call('GET', '/account/read/license', { key })).status, 403, 'and reads people only')

  const list = await admin(service, 'player', 'list', '--parent', '5', '--json')
  t.equal(list.code, 0)
  const players = JSON.parse(list.stdout)
  t.equal(players.length, 1)
  t.match(players[0], { Id: player.PlayerId, Name: 'Lobby', DispGroup: 'Front', Location: 'Hall', Parent: 5, Custno: 0, Key_Id: player.Id })
  t.match(players[0].Last_Seen, /GMT$/, 'seen by its Today call')

  const shown = await admin(service, 'tenant', 'show', '--parent', '5', '--custno', '0', '--json')
  t.match(JSON.parse(shown.stdout), { MaxPlayers: 1, Players: 1, Keys: 0, People: 0, TimeZone: 'Europe/Oslo' })

  const removed = await admin(service, 'player', 'remove', '--id', String(player.PlayerId), '--json')
  t.equal(removed.code, 0, removed.stderr)
  t.same(JSON.parse(removed.stdout), { Id: player.PlayerId, Removed: 1, Key_Id: player.Id })
  service.kernel.services.keys.changed(player.Id) // the CLI is another process: this one forgets the key now instead of after its cache time
  t.equal((await service.call('GET', '/People/Read/Today', { key })).status, 401, 'its key is gone')
  t.equal((await admin(service, 'player', 'remove', '--id', String(player.PlayerId))).code, 2, 'no such player')
  t.equal((await admin(service, 'player', 'add', '--parent', '5', '--custno', '0', '--name', 'Garage', '--http')).code, 0, 'the place is free again')
})
