import type { MountedRouteInfo, Plugin } from '../plugin.ts'
import type { MountedRoute } from './exchange.ts'
import { compileAclPath } from '../auth/aclPath.ts'

/**
 * `kernel.routes()`: what is mounted, described for plugins (the route list, the OpenAPI
 * document). Built on first use, since a plugin's setup runs before the next plugin's
 * routes are mounted, and kept: the route table does not change after start.
 */
export function routeCatalog(plugins: readonly Plugin[], mounted: () => readonly MountedRoute[]): () => readonly MountedRouteInfo[] {
  let catalog: readonly MountedRouteInfo[] | null = null
  return () => (catalog ??= Object.freeze(mounted().map(({ plugin, route }) => {
    const entries = (plugins.find((candidate) => candidate.name === plugin)?.defaultGroups ?? []).flatMap((group) => group.paths)
    const exact = entries.find((entry) => entry.path.toLowerCase() === route.path.toLowerCase())
    const covering = entries.filter((entry) => compileAclPath(entry.path)(route.path))
    return Object.freeze({
      plugin,
      method: route.method,
      path: route.path,
      dayCode: route.dayCode === true,
      cacheSeconds: route.cache?.ttlSeconds ?? 0,
      body: route.body ?? null,
      query: route.query ?? null,
      rawContentType: route.rawContentType ?? null,
      summary: (exact ?? covering[0])?.displayName ?? null,
      publicByDefault: covering.some((entry) => entry.isPublic === 1),
    })
  })))
}
