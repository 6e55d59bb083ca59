import type { IncomingMessage } from 'node:http'
import type { TLSSocket } from 'node:tls'

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
