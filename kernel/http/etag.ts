/**
 * If-None-Match by weak comparison (RFC 9110 13.1.2): the header may list several tags,
 * with or without `W/`, or be `*`; any that names `etag` answers 304.
 */
export function etagMatches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false
  return ifNoneMatch.split(',').some((candidate) => {
    const tag = candidate.trim().replace(/^W\//, '')
    return tag === '*' || tag === etag
  })
}
