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
 * The values of parameter `name` (`for`, `proto`) in one element of a `Forwarded` header
 * (RFC 7239), trimmed, in their order; quotes are left to the caller.
 */
export function forwardedValues(element: string, name: string): string[] {
  const found: string[] = []
  for (const pair of element.split(';')) {
    const equals = pair.indexOf('=')
    if (equals !== -1 && pair.slice(0, equals).trim().toLowerCase() === name) found.push(pair.slice(equals + 1).trim())
  }
  return found
}

/**
 * The `proto=` of the last element of a `Forwarded` header (RFC 7239): the element the
 * nearest proxy appended, about the connection it received. Null when it names none.
 */
function forwardedProto(lines: string[]): string | null {
  const proto = forwardedValues(lines.join(',').split(',').pop() ?? '', 'proto')[0]
  return proto === undefined ? null : proto.replace(/^"|"$/g, '').toLowerCase()
}

/**
 * True when the call arrived over TLS: our own listener, or a trusted proxy (by peer
 * address) that says so in X-Forwarded-Proto or, when it sends none, in the `proto=` of
 * the `Forwarded` element it appended. Anyone else's forwarding headers are ignored.
 */
export function secureTransport(trustedProxies: ReadonlySet<string>) {
  return (request: IncomingMessage): boolean => {
    if ((request.socket as TLSSocket).encrypted) return true
    if (trustedProxies.size === 0 || !trustedProxies.has(peerAddress(request))) return false
    const forwarded = request.headers['x-forwarded-proto']
    if (typeof forwarded !== 'string') return forwardedProto(request.headersDistinct.forwarded ?? []) === 'https'
    // With a chain of proxies the nearest one (ours) appended the last value.
    const last = forwarded.slice(forwarded.lastIndexOf(',') + 1).trim().toLowerCase()
    return last === 'https'
  }
}
