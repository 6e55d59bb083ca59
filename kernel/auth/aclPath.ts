/**
 * ACL paths (interface 2.2): a path of segments where a `*` segment covers that level
 * and every deeper one. Matching is case-insensitive and runs against the canonical
 * route pattern that matched, never against the raw URL (D1).
 */
export type AclMatcher = (routePath: string) => boolean

const segmentPattern = /^[A-Za-z0-9._~:@!$&'()+;=-]+$/

/** Null when the path is acceptable as an ACL path, else the reason. */
export function aclPathProblem(path: string): string | null {
  if (!path.startsWith('/')) return 'an ACL path starts with /'
  // api_acl.path is varchar(255): longer is a clear refusal, not MariaDB's error (SQLite would store it).
  if (path.length > 255) return 'an ACL path is at most 255 characters long'
  const segments = path.slice(1).split('/')
  for (let index = 0; index < segments.length; index++) {
    const segment = segments[index]
    if (segment === '*') {
      if (index !== segments.length - 1) return '* is allowed only as the last segment'
      continue
    }
    if (!segmentPattern.test(segment) || segment === '.' || segment === '..') return `segment '${segment}' is not allowed`
  }
  return null
}

export function compileAclPath(path: string): AclMatcher {
  const lower = path.toLowerCase()
  if (lower === '/*') return () => true
  if (lower.endsWith('/*')) {
    const prefix = lower.slice(0, -1) // keeps the trailing slash: '/api/read/'
    return (routePath) => routePath.length > prefix.length && routePath.toLowerCase().startsWith(prefix)
  }
  return (routePath) => routePath.toLowerCase() === lower
}
