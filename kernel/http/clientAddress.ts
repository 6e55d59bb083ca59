import type { IncomingMessage } from 'node:http'
import { isIP } from 'node:net'
import { forwardedValues, peerAddress, plainAddress } from './transport.ts'

/** `for=` values of a `Forwarded` header (RFC 7239), nearest proxy's last. */
function forwardedFor(header: string): string[] {
  return header.split(',').flatMap((element) => forwardedValues(element, 'for'))
}

/** An address as written in a forwarding header: quotes, `[v6]:port` and `v4:port` taken off. */
function bareAddress(token: string): string {
  let value = token.trim().replace(/^"|"$/g, '')
  if (value.startsWith('[')) value = value.slice(1, value.indexOf(']') === -1 ? undefined : value.indexOf(']'))
  else if (/^\d+\.\d+\.\d+\.\d+:\d+$/.test(value)) value = value.slice(0, value.lastIndexOf(':'))
  return plainAddress(value)
}

function headerLines(request: IncomingMessage, name: string): string[] {
  return request.headersDistinct[name] ?? []
}

/**
 * The caller's address for the log (Remote_Addr) and the access line. From a peer in
 * `trustProxy`, the forwarding headers are believed: `Forwarded: for=` when present, else
 * `X-Forwarded-For`; read from the right (each proxy appends), hops that are trusted
 * proxies themselves are skipped and the first other address is the client. From
 * anyone else they are ignored: the peer is the caller. A hop that is not an IP address
 * (`unknown`, an obfuscated name) ends the walk at the last trusted hop.
 */
export function clientAddress(trustedProxies: ReadonlySet<string>): (request: IncomingMessage) => string {
  if (trustedProxies.size === 0) return peerAddress
  return (request) => {
    const peer = peerAddress(request)
    if (!trustedProxies.has(peer)) return peer
    const forwarded = headerLines(request, 'forwarded')
    const hops = forwarded.length > 0
      ? forwarded.flatMap(forwardedFor)
      : headerLines(request, 'x-forwarded-for').flatMap((line) => line.split(','))
    let client = peer
    for (let index = hops.length - 1; index >= 0; index--) {
      const hop = bareAddress(hops[index])
      if (isIP(hop) === 0) break
      client = hop
      if (!trustedProxies.has(hop)) break
    }
    return client
  }
}
