/**
 * `admin tenant set|show` (D14): a tenant's entitlement.
 *   tenant set --parent N --custno N [--max-keys N|none] [--max-people N|none] [--max-players N|none] [--timezone ZONE|none]
 *              [--max-hits MAXHITS|none]   (issue 16: a tenant-wide MaxHits, e.g. "100000/1Mon")
 *   tenant show --parent N --custno N
 * Custno 0 sets the maxima of the whole parent (every customer of it together).
 */
import type { Kernel } from '../../kernel/boot/kernel.ts'
import { changeEntitlement, type Entitlement } from '../../kernel/tenants/entitlements.ts'
import { isTimeZone } from '../../kernel/tenants/timeZone.ts'
import { UsageError, wholeNumber } from './usageError.ts'
import { noMoreWords, parentOption, serviceSeesIt } from './command.ts'
import { formatMaxHits, MaxHitsError, parseMaxHits } from '../../kernel/limits/maxHits.ts'

type Options = Record<string, string | string[] | boolean | undefined>

export const tenantUsage = `  tenant set --parent N --custno N                  a tenant's maxima (N, or none = unlimited) and time zone
          [--max-keys N] [--max-people N] [--max-players N] [--timezone ZONE]
          [--max-hits "100000/1Mon"]                  every call of every key of the tenant together
  tenant show --parent N --custno N                 its maxima, time zone and what it uses`

/** A maximum: a whole number, `none` (unlimited), or not given (unchanged). */
function maximum(options: Options, name: string): number | null | undefined {
  const value = options[name]
  if (value === undefined) return undefined
  if (value === 'none') return null
  if (typeof value !== 'string' || !/^\d{1,9}$/.test(value)) throw new UsageError(`--${name} needs a whole number or none`)
  return Number(value)
}

function zone(options: Options): string | null | undefined {
  const value = options.timezone
  if (value === undefined) return undefined
  if (value === 'none') return null
  if (typeof value !== 'string' || !isTimeZone(value)) throw new UsageError(`--timezone ${String(value)} is not an IANA time zone (e.g. Europe/Oslo, UTC)`)
  return value
}

/** A tenant-wide MaxHits (D7 grammar) in its canonical spelling, `none` (no quota), or not given (unchanged). */
function maxHits(options: Options): string | null | undefined {
  const value = options['max-hits']
  if (value === undefined) return undefined
  if (value === 'none') return null
  const needs = '--max-hits needs a MaxHits value such as 100000/1Mon, or none'
  if (typeof value !== 'string') throw new UsageError(needs)
  try {
    const windows = parseMaxHits(value)
    // An empty value is a mistake (an unset shell variable), not a way to say none.
    if (windows.length === 0) throw new UsageError(needs)
    return formatMaxHits(windows)
  } catch (error) {
    if (error instanceof MaxHitsError) throw new UsageError(`--max-hits: ${error.message}`)
    throw error
  }
}

async function shown(kernel: Kernel, scope: { parent: number; custno: number }, entitlement: Entitlement) {
  const tenants = kernel.services.tenants
  return {
    Parent: scope.parent,
    Custno: scope.custno,
    ...entitlement,
    EffectiveTimeZone: await tenants.timeZone(scope),
    ...(await tenants.usage(scope)),
  }
}

export async function tenantCommand(kernel: Kernel, words: string[], options: Options): Promise<unknown> {
  if (words[1] === 'show' || words[1] === 'set') noMoreWords(words, 2, `tenant ${words[1]}`)
  // Only `show` may look at parent 0 (the keys an earlier version let the operator put there).
  const parent = words[1] === 'set' ? parentOption(options.parent, 'tenant set') : wholeNumber(options, 'parent')
  const scope = { parent, custno: wholeNumber(options, 'custno') }
  if (words[1] === 'show') return shown(kernel, scope, await kernel.services.tenants.entitlement(scope))
  if (words[1] === 'set') {
    const change = {
      MaxKeys: maximum(options, 'max-keys'),
      MaxPeople: maximum(options, 'max-people'),
      MaxPlayers: maximum(options, 'max-players'),
      TimeZone: zone(options),
      MaxHits: maxHits(options),
    }
    if (Object.values(change).every((value) => value === undefined)) throw new UsageError('tenant set needs at least one of --max-keys, --max-people, --max-players, --timezone, --max-hits')
    // The operator's own change, straight to the table: plugins can read entitlements, never set them.
    const { entitlement, changed } = await changeEntitlement(kernel.database.db, scope, change, Date.now())
    if (!changed) console.error(`admin: tenant ${scope.parent}/${scope.custno} already has these settings; nothing changed`)
    else if (change.MaxHits !== undefined) {
      // A running service keeps a tenant's quota with its loaded keys: they are dropped, as for an ACL change.
      kernel.services.keys.accessChanged()
      console.error(`admin: the tenant's MaxHits: ${serviceSeesIt(kernel)}`)
    }
    return shown(kernel, scope, entitlement)
  }
  throw new UsageError(`tenant ${words[1] ?? ''}: expected set or show\n${tenantUsage}`)
}
