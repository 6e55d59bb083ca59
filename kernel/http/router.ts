import FindMyWay from 'find-my-way'
import type { Route } from '../plugin.ts'
import type { MountedRoute } from './exchange.ts'
import { compileInput, newSchemaCompiler } from './schemas.ts'

/**
 * The route table: find-my-way, case-insensitive (D1), no slash folding, so every
 * spelling that reaches a route reaches it by its one canonical pattern.
 */
export class RouteTable {
  private readonly router = FindMyWay({ caseSensitive: false, ignoreTrailingSlash: false, ignoreDuplicateSlashes: false, maxParamLength: 200 })
  private readonly bodyAjv = newSchemaCompiler('body')
  private readonly queryAjv = newSchemaCompiler('query')
  private readonly mounted: MountedRoute[] = []

  constructor(private readonly basePath: string) {}

  add(plugin: string, route: Route): void {
    if (!route.path.startsWith('/')) throw new Error(`route ${route.path} of plugin ${plugin} must start with /`)
    const taken = this.mounted.find((other) => other.route.method === route.method && other.route.path.toLowerCase() === route.path.toLowerCase())
    if (taken) throw new Error(`${route.method} ${route.path} of plugin ${plugin} is already routed to plugin ${taken.plugin}`)
    const mounted: MountedRoute = {
      id: this.mounted.length,
      plugin,
      route,
      writes: route.writes ?? (route.method === 'POST' && !/\/read\//i.test(route.path)),
      validateBody: route.body ? compileInput(this.bodyAjv, route.body) : null,
      // Every route's query, declared or not, gets the text rule (schemas.ts).
      validateQuery: compileInput(this.queryAjv, route.query ?? {}),
    }
    this.mounted.push(mounted)
    this.router.on(route.method, this.basePath + route.path, () => undefined, mounted)
  }

  find(method: string, path: string): MountedRoute | null {
    const found = this.router.find(method as 'GET', path)
    return found ? (found.store as MountedRoute) : null
  }

  routes(): readonly MountedRoute[] {
    return this.mounted
  }
}
