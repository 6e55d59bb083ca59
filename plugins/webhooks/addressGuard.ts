import { BlockList, isIP } from 'node:net'
import { lookup } from 'node:dns/promises'
import { parseAddressRange } from '../../kernel/sdk.ts'

/**
 * The SSRF guard (issue 17): a webhook may only reach addresses the operator has not
 * kept for itself. A URL's host is resolved and every address it resolves to must be
 * public, unless listed in config `webhooks.allowAddresses` (addresses or CIDR
 * ranges). The delivery then connects to the very address checked, so a DNS answer
 * that changes between the check and the connection (rebinding) cannot slip past.
 */

/**
 * Address ranges no delivery reaches unless allowed: private, shared, loopback, link-local,
 * unique-local, unspecified, multicast, reserved. The documentation ranges (TEST-NET,
 * 2001:db8::/32) stay open: nothing internal lives there, and examples use them.
 */
const closedRanges: [string, number, 'ipv4' | 'ipv6'][] = [
  ['0.0.0.0', 8, 'ipv4'],
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'],
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'],
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'],
  ['240.0.0.0', 4, 'ipv4'],
  ['::', 128, 'ipv6'],
  ['::1', 128, 'ipv6'],
  ['fe80::', 10, 'ipv6'],
  ['fc00::', 7, 'ipv6'],
  ['ff00::', 8, 'ipv6'],
  // NAT64 (well-known and local-use), Teredo, 6to4 and IPv4-compatible forms embed IPv4 addresses a gateway would reach for us.
  ['64:ff9b::', 96, 'ipv6'],
  ['64:ff9b:1::', 48, 'ipv6'],
  ['2001::', 32, 'ipv6'],
  ['2002::', 16, 'ipv6'],
  ['::', 96, 'ipv6'],
]

const closed = new BlockList()
for (const [address, prefix, family] of closedRanges) closed.addSubnet(address, prefix, family)

export class AddressRefused extends Error {}

/** An address as checked and connected to. */
export interface CheckedAddress {
  address: string
  family: 4 | 6
}

/** `::ffff:127.0.0.1` and `::ffff:7f00:1` are 127.0.0.1: an IPv4-mapped address follows IPv4's rules. */
function unmapped(address: string): string {
  const lower = address.toLowerCase()
  if (!lower.startsWith('::ffff:')) return address
  const rest = lower.slice(7)
  if (isIP(rest) === 4) return rest
  const groups = rest.split(':')
  if (groups.length !== 2 || !groups.every((group) => /^[0-9a-f]{1,4}$/.test(group))) return address
  const [high, low] = groups.map((group) => parseInt(group, 16))
  return [high >> 8, high & 255, low >> 8, low & 255].join('.')
}

export class AddressGuard {
  private readonly allowed = new BlockList()

  /** The entries are checked when the config is loaded (a bad one stops the start); one that is not a range here still throws. */
  constructor(allowAddresses: readonly string[]) {
    for (const entry of allowAddresses) {
      const range = parseAddressRange(entry)
      if (range === null) throw new Error(`invalid setting webhooks.allowAddresses: not an IP address or CIDR range (got ${JSON.stringify(entry)})`)
      this.allowed.addSubnet(range.address, range.prefix, range.family)
    }
  }

  /** Whether a delivery may connect to this address. */
  permits(address: string): boolean {
    const plain = unmapped(address)
    const type = isIP(plain) === 4 ? 'ipv4' : 'ipv6'
    if (this.allowed.check(plain, type) || (plain !== address && this.allowed.check(address, 'ipv6'))) return true
    return !closed.check(plain, type)
  }

  /**
   * The address to connect to for `hostname`: every address it resolves to must be
   * permitted (one closed answer among open ones is refused: the resolver picks).
   */
  async resolve(hostname: string): Promise<CheckedAddress> {
    const host = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname
    let addresses: { address: string; family: number }[]
    if (isIP(host) !== 0) {
      addresses = [{ address: host, family: isIP(host) }]
    } else {
      try {
        addresses = await lookup(host, { all: true, verbatim: true })
      } catch {
        throw new AddressRefused(`The host ${host} does not resolve.`)
      }
    }
    if (addresses.length === 0) throw new AddressRefused(`The host ${host} does not resolve.`)
    for (const { address } of addresses) {
      if (!this.permits(address)) throw new AddressRefused(`The host ${host} resolves to ${address}, a private, loopback or link-local address that webhooks may not reach.`)
    }
    return { address: addresses[0].address, family: addresses[0].family === 6 ? 6 : 4 }
  }
}
