import type { IncomingMessage } from 'node:http'
import type { Stage } from '../pipeline.ts'
import type { Exchange } from '../exchange.ts'
import type { KeyDirectory } from '../../auth/keyDirectory.ts'
import type { RequestIds } from '../../callLog/requestId.ts'
import type { AclEntry } from '../../plugin.ts'
import { forbidden, refused, unauthorized } from '../errors.ts'
import { effectiveAclEntry } from '../../auth/effectiveAcl.ts'

/** The ACL entry that allows this call's route for its key (memoised per access profile and route). */
export type AclLookup = (exchange: Exchange) => AclEntry | null

export function aclLookup(keys: KeyDirectory): AclLookup {
  return (exchange) => {
    if (exchange.acl === null) exchange.acl = keys.aclFor(exchange.record!, exchange.mounted.route.path)
    return exchange.acl
  }
}

/**
 * The ACL decision, in one place: the route's canonical path (D1) must be covered by an
 * entry of the key's groups (else 403), or, for a call without credentials, by an
 * Is_Public entry (else 401: credentials are what it lacks); HTTPS when the key or the
 * entry requires it (403). An anonymous call is established by its public entry, so it
 * gets its request id here (a key's call gets it once its signature is verified).
 */
export function authorizeStage(keys: KeyDirectory, lookup: AclLookup, requestIds: RequestIds, isSecure: (request: IncomingMessage) => boolean): Stage {
  function decide(exchange: Exchange, entry: AclEntry | null): void {
    if (entry === null) throw forbidden(`Your ACL does not allow ${exchange.mounted.route.path}.`)
    if ((exchange.caller.requireHttps === 1 || entry.requireHttps === 1) && !isSecure(exchange.request)) {
      throw forbidden('HTTPS is required for this key or path.')
    }
  }
  const missingCredentials = () => refused(unauthorized('Missing credentials: x-apikey, x-apidate and x-apihmac are required.'), 'missing_credentials')

  return {
    name: 'acl',
    run(exchange) {
      if (!exchange.caller.anonymous) return decide(exchange, lookup(exchange))
      const route = exchange.mounted.route
      return keys.publicEntries().then((entries) => {
        // Of the public entries that match, the strictest rule holds, as for a key (effectiveAcl.ts).
        const entry = effectiveAclEntry(entries, route.path)
        if (!entry || route.dayCode) throw missingCredentials()
        exchange.acl = entry
        decide(exchange, entry)
        exchange.requestId = requestIds.next()
      })
    },
  }
}
