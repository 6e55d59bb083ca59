import type { IncomingMessage } from 'node:http'
import type { TLSSocket } from 'node:tls'
import type { Stage } from '../pipeline.ts'
import { forbidden } from '../errors.ts'

/** An IPv4 address as such, not in its IPv4-mapped IPv6 spelling (`::ffff:127.0.0.1`). */
export function plainAddress(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address
}

export function peerAddress(request: IncomingMessage): string {
  return plainAddress(request.socket.remoteAddress ?? '')
}

/**
 * True when the call arrived over TLS: our own listener, or a trusted proxy (by peer
 * address) that says so in X-Forwarded-Proto. Anyone else's X-Forwarded-Proto is ignored.
 */
export function secureTransport(trustedProxies: ReadonlySet<string>) {
  return (request: IncomingMessage): boolean => {
    if ((request.socket as TLSSocket).encrypted) return true
    if (trustedProxies.size === 0 || !trustedProxies.has(peerAddress(request))) return false
    const forwarded = request.headers['x-forwarded-proto']
    if (typeof forwarded !== 'string') return false
    // With a chain of proxies the nearest one (ours) appended the last value.
    const last = forwarded.slice(forwarded.lastIndexOf(',') + 1).trim().toLowerCase()
    return last === 'https'
  }
}

/** ACL (against the canonical route path, D1) and HTTPS (key or entry Require_Https) - 403 each. */
export function authorizeStage(isSecure: (request: IncomingMessage) => boolean): Stage {
  return {
    name: 'acl',
    run(exchange) {
      const entry = exchange.acl
      if (entry === null) throw forbidden(`Your ACL does not allow ${exchange.mounted.route.path}.`)
      if ((exchange.caller.requireHttps === 1 || entry.requireHttps === 1) && !isSecure(exchange.request)) {
        throw forbidden('HTTPS is required for this key or path.')
      }
    },
  }
}
