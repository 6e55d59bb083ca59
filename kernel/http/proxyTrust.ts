import type { IncomingMessage } from 'node:http'
import { clientAddress } from './clientAddress.ts'
import { secureTransport } from './transport.ts'

/**
 * What a call's forwarding headers may claim, given the `trustProxy` list: its client's
 * address (the log's Remote_Addr, the access line) and that it arrived over TLS (the
 * HTTPS rule, Request_Scheme). Built once at start and shared, so every stage judges a
 * call's proxies alike.
 */
export interface ProxyTrust {
  clientAddress(request: IncomingMessage): string
  isSecure(request: IncomingMessage): boolean
}

export function proxyTrust(trustProxy: readonly string[]): ProxyTrust {
  const trusted = new Set(trustProxy)
  return { clientAddress: clientAddress(trusted), isSecure: secureTransport(trusted) }
}
