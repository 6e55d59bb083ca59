import { isIP } from 'node:net'

/** An IP address range: an address with its prefix length (a plain address is a full-length range). */
export interface AddressRange {
  address: string
  prefix: number
  family: 'ipv4' | 'ipv6'
}

/**
 * `10.0.0.0/8`, `fd00::/8`, `127.0.0.1` (= /32) or `::1` (= /128) as a range; null for
 * anything else. Config settings that list addresses (webhooks.allowAddresses) are
 * checked with it at start, so a typo stops the service instead of allowing nothing.
 */
export function parseAddressRange(entry: string): AddressRange | null {
  const [address, prefix, extra] = entry.split('/')
  const family = isIP(address)
  if (family === 0 || extra !== undefined) return null
  const bits = family === 4 ? 32 : 128
  if (prefix === undefined) return { address, prefix: bits, family: family === 4 ? 'ipv4' : 'ipv6' }
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > bits) return null
  return { address, prefix: Number(prefix), family: family === 4 ? 'ipv4' : 'ipv6' }
}
