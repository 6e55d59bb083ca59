import FindMyWay from 'find-my-way'
import { Ajv } from 'ajv'
import type { Route } from '../plugin.ts'
import type { MountedRoute } from './exchange.ts'
import { compileInput, compileQuery, newSchemaCompiler } from './schemas.ts'
import { PluginError } from '../boot/pluginError.ts'

/**
 * The route table: find-my-way, case-insensitive (D1), no slash folding, so every
 * spelling that reaches a route reaches it by its one canonical pattern.
 */
export class RouteTable {
  private readonly router = FindMyWay({ caseSensitive: false, ignoreTrailingSlash: false, ignoreDuplicateSlashes: false, maxParamLength: 200 })
  private readonly bodyAjv = newSchemaCompiler('body')
  private readonly queryAjv = newSchemaCompiler('query')
  /** Checks answer schemas against the JSON Schema meta-schema only: they are documentation, never compiled. */
  private readonly answerAjv = new Ajv({ strict: false, validateFormats: false })
  private readonly mounted: MountedRoute[] = []

  constructor(private readonly basePath: string) {}

  /** Mounts one route; a route the kernel cannot serve as declared stops the start, naming plugin and route. */
  add(plugin: string, route: Route): void {
    const named = `${route.method} ${route.path} of plugin ${plugin}`
    if (typeof route.path !== 'string' || !route.path.startsWith('/')) throw new PluginError(`route ${route.path} of plugin ${plugin} must start with /`)
    // Plugins written in JavaScript get no type check: what the types promise is checked here, once.
    if (route.method !== 'GET' && route.method !== 'POST') throw new PluginError(`${named}: method must be GET or POST`)
    // A '*' or ':' would make find-my-way match a whole family of paths that no ACL entry names one by one.
    if (/[*:]/.test(route.path)) throw new PluginError(`${named}: a path is one fixed path (no * or :)`)
    const problem = unservablePath(route.path)
    if (problem) throw new PluginError(`${named}: ${problem}`)
    if (typeof route.xml?.root !== 'string') throw new PluginError(`${named}: xml.root is required (the root element of its XML answers)`)
    // Found here rather than as a 500 on every call of the route.
    if (typeof route.handler !== 'function') throw new PluginError(`${named}: handler must be a function`)
    if (route.cache !== undefined && !validCache(route.cache)) throw new PluginError(`${named}: cache is { ttlSeconds: a number above 0, partition: a function }`)
    // Documentation only (never compiled): carried into the OpenAPI document as it is, so it must at least be a schema.
    if (route.answer !== undefined) {
      if (typeof route.answer !== 'object' || route.answer === null || Array.isArray(route.answer)) throw new PluginError(`${named}: answer must be a JSON schema object`)
      refuseReference(named, 'answer', route.answer)
      if (!this.answerAjv.validateSchema(route.answer)) throw new PluginError(`${named}: its answer schema is invalid: ${this.answerAjv.errorsText(this.answerAjv.errors)}`)
    }
    const taken = this.mounted.find((other) => other.route.method === route.method && other.route.path.toLowerCase() === route.path.toLowerCase())
    if (taken) throw new PluginError(`${route.method} ${route.path} of plugin ${plugin} is already routed to plugin ${taken.plugin}`)
    const mounted: MountedRoute = {
      id: this.mounted.length,
      plugin,
      route,
      writes: route.writes ?? (route.method === 'POST' && !/\/read\//i.test(route.path)),
      validateBody: route.body ? compiled(named, 'body', route.body, (schema) => compileInput(this.bodyAjv, schema)) : null,
      // Every route's query, declared or not, gets the text rule (schemas.ts); a route that
      // declares none takes none, so a misspelt parameter (?Format=xml) is a 400, not ignored.
      validateQuery: compiled(named, 'query', route.query ?? noQuery, (schema) => compileQuery(this.queryAjv, schema)),
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

/**
 * Why a route path could never be called as written, or null: a request's `?` and `#`
 * start its query and fragment, `%` escapes are not decoded before matching, and empty,
 * `.` and `..` segments and a trailing `/` are spellings clients and proxies fold away.
 */
function unservablePath(path: string): string | null {
  if (/[?#%]|[\s\x00-\x1f\x7f]/.test(path)) return 'a path has no ?, #, %, white space or control character (a query string is declared in query)'
  const segments = path.slice(1).split('/')
  if (segments.some((segment) => segment === '')) return 'a path has no empty segment (no // and no trailing /)'
  if (segments.some((segment) => segment === '.' || segment === '..')) return 'a path has no . or .. segment'
  return null
}

/** A cache policy a plugin written in JavaScript declared as the types ask. */
function validCache(cache: unknown): boolean {
  const policy = cache as { ttlSeconds?: unknown; partition?: unknown } | null
  return typeof policy === 'object' && policy !== null && typeof policy.ttlSeconds === 'number' && Number.isFinite(policy.ttlSeconds) && policy.ttlSeconds > 0 && typeof policy.partition === 'function'
}

/** The query of a route that declares none: no parameter but `format`, which the input stage takes first. */
const noQuery = { type: 'object', additionalProperties: false, properties: {} } as const

/**
 * `$ref` is refused in a route's schemas: the OpenAPI document (D15) carries each schema
 * as it is, where a local reference cannot resolve.
 */
function refuseReference(named: string, part: 'body' | 'query' | 'answer', schema: unknown): void {
  if (JSON.stringify(schema).includes('"$ref"')) throw new PluginError(`${named}: its ${part} schema uses $ref; write the referenced schema out (the OpenAPI document carries schemas as they are)`)
}

/** A route's schema compiled, or an error naming the route. */
function compiled<S, T>(named: string, part: 'body' | 'query', schema: S, compile: (schema: S) => T): T {
  refuseReference(named, part, schema)
  try {
    return compile(schema)
  } catch (error) {
    throw new PluginError(`${named}: its ${part} schema is invalid: ${(error as Error).message}`)
  }
}
