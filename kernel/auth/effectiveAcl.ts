import type { AclEntry } from '../plugin.ts'
import type { HashMethod } from './signature.ts'

/**
 * The one ACL entry that governs a call to `routePath` when several entries (from
 * several groups, or a public one beside a group's) cover it. Overlaps must never
 * weaken a path, so the strictest rule of all matching entries wins:
 * - Require_Https is 1 when any matching entry requires it;
 * - Require_Hash is the strongest method any matching entry names (sha512 > sha384 >
 *   sha256 > sha1 > md5; 0, "any method", only when every entry says 0). The numbers of
 *   interface 2.2 are in that order, so the strongest is the largest.
 * The answer carries the Id, Path, Display_Name and Is_Public of the matching entry with
 * the lowest id (the one that governed the call before overlaps were merged): that id
 * is the call log's Api_Acl. Null when no entry matches. When that entry already is the
 * strictest (always so when only one matches), it is returned itself.
 *
 * The key's own Require_Hash still overrides the result (authenticate.ts); callers
 * memoise the answer per access profile and route (KeyDirectory.aclFor).
 */
export function effectiveAclEntry(entries: readonly AclEntry[], routePath: string): AclEntry | null {
  let lowest: AclEntry | null = null
  let requireHttps = 0
  let requireHash: HashMethod = 0
  for (const entry of entries) {
    if (!entry.matches(routePath)) continue
    if (lowest === null || entry.id < lowest.id) lowest = entry
    if (entry.requireHttps === 1) requireHttps = 1
    if (entry.requireHash > requireHash) requireHash = entry.requireHash
  }
  if (lowest === null || (lowest.requireHttps === requireHttps && lowest.requireHash === requireHash)) return lowest
  return Object.freeze({ ...lowest, requireHttps, requireHash })
}
