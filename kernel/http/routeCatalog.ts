import type { MountedRouteInfo, Plugin } from '../plugin.ts'
import type { MountedRoute } from './exchange.ts'
import { compileAclPath } from '../auth/aclPath.ts'

function describe(plugins: readonly Plugin[], { plugin, route, writes }: MountedRoute): MountedRouteInfo {
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
    answer: route.answer ?? null,
    rawContentType: route.rawContentType ?? null,
    etag: route.etag === true,
    answerHeaders: route.answerHeaders ?? {},
    writes,
    bodyRequired: route.body !== undefined && (route.bodyRequired ?? ((route.body as { required?: string[] }).required ?? []).length > 0),
    summary: exact?.displayName ?? route.summary ?? covering[0]?.displayName ?? null,
    publicByDefault: covering.some((entry) => entry.isPublic === 1),
  })
}

/**
 * `kernel.routes()`: what is mounted, described for plugins (the route list, the OpenAPI
 * document). Built on first use, since a plugin's setup runs before the next plugin's
 * routes are mounted, and kept: the route table does not change after start (a call
 * made during setup sees the routes mounted so far, and a later call all of them).
 */
export function routeCatalog(plugins: readonly Plugin[], mounted: () => readonly MountedRoute[]): () => readonly MountedRouteInfo[] {
  let catalog: readonly MountedRouteInfo[] = []
  return () => {
    const routes = mounted()
    if (catalog.length !== routes.length) catalog = Object.freeze(routes.map((route) => describe(plugins, route)))
    return catalog
  }
}
