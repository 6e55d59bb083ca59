import { defineRoute, type AclEntry, type CallerKey, type KernelServices, type MountedRouteInfo } from '../../kernel/sdk.ts'
import { operationsAnswerSchema } from './schemas.ts'

/** One entry of GET /Api/Read/List (D14). */
export interface Operation {
  Method: string
  Path: string
  Display_Name: string | null
  Plugin: string
  Needs: 'key,date,hmac' | 'key,date,hmac,today'
  Cached: number
  Body: object | string | null
  Query: object | string | null
}

/**
 * The name a caller sees for an operation: its own ACL entry when that entry names
 * exactly this path (an operator's wording wins), else what the owning plugin calls it,
 * else the covering entry (a wildcard such as `/People/Read/*`).
 */
function displayName(route: MountedRouteInfo, covering: AclEntry): string | null {
  if (covering.path.toLowerCase() === route.path.toLowerCase()) return covering.displayName
  return route.summary ?? covering.displayName
}

function operationsFor(routes: readonly MountedRouteInfo[], caller: CallerKey, cachesAnswers: boolean): Operation[] {
  const operations: Operation[] = []
  for (const route of routes) {
    // The same rule the ACL stage applies: the first entry that covers the canonical path.
    const covering = caller.acl.find((entry) => entry.matches(route.path))
    if (!covering) continue
    operations.push({
      Method: route.method,
      Path: route.path,
      Display_Name: displayName(route, covering),
      Plugin: route.plugin,
      // A key with DayPass 1 needs the day code on every call (D5).
      Needs: route.dayCode || caller.dayPass === 1 ? 'key,date,hmac,today' : 'key,date,hmac',
      // With the response cache switched off (cache.responses false) nothing is cached.
      Cached: cachesAnswers ? route.cacheSeconds : 0,
      Body: route.body,
      Query: route.query,
    })
  }
  return operations
}

/** XML cannot carry a JSON schema's keys (`$ref`, `^[0-9]+$`) as element names: there a schema is its JSON text. */
function withSchemasAsText(operations: Operation[]): Operation[] {
  return operations.map((operation) => ({
    ...operation,
    Body: operation.Body === null ? null : JSON.stringify(operation.Body),
    Query: operation.Query === null ? null : JSON.stringify(operation.Query),
  }))
}

/**
 * GET /Api/Read/List: the operations the caller may call now. Keys with the same groups
 * share one frozen ACL array (their access profile), and any ACL or group change makes
 * a new one, so the list is computed once per profile (and DayPass) and never stale.
 */
export function operationRoutes(kernel: KernelServices) {
  const lists = new WeakMap<readonly AclEntry[], { json: Operation[]; xml: Operation[] }[]>()

  function listFor(caller: CallerKey) {
    let byDayPass = lists.get(caller.acl)
    if (byDayPass === undefined) {
      byDayPass = []
      lists.set(caller.acl, byDayPass)
    }
    const variant = caller.dayPass === 1 ? 1 : 0
    if (byDayPass[variant] === undefined) {
      const json = operationsFor(kernel.routes(), caller, kernel.config.cache.responses)
      byDayPass[variant] = { json, xml: withSchemasAsText(json) }
    }
    return byDayPass[variant]
  }

  return [
    defineRoute({
      method: 'GET',
      path: '/Api/Read/List',
      answer: operationsAnswerSchema,
      xml: { root: 'Operations', item: 'Operation' },
      handler: (call) => {
        const list = listFor(call.caller)
        return call.format === 'xml' ? list.xml : list.json
      },
    }),
  ]
}
