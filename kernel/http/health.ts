import type { IncomingMessage, ServerResponse } from 'node:http'

export interface ReadinessChecks {
  /** A cheap query (`select 1`); rejects or hangs while the database does not answer. */
  ping: () => Promise<unknown>
  /** Records waiting in the call-log queue and its bound. */
  logQueue: () => { queued: number; max: number }
  /** True once close() began: a load balancer should stop sending calls. */
  closing: () => boolean
  /** Optional further checks (Redis, when configured); each true when usable. */
  extra?: (() => boolean | Promise<boolean>)[]
  /**
   * What works in a degraded way while the process stays ready (Redis away: limits per
   * process), sent as a `Keygate-Degraded` header on /readyz; null when nothing is.
   */
  degraded?: () => string | null
}

const pingTimeoutMs = 1000
const headers = { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' }

/**
 * `GET /healthz` (the process answers) and `GET /readyz` (it can serve calls: the
 * database answers within a second, migrations are done - the kernel exists only after
 * them -, the call-log queue is below its bound, not shutting down). Outside the base
 * path, no credentials, no ACL, not logged; the answer is `ok` or `not ready` and nothing
 * else, so it tells an attacker nothing. Returns false for any other path.
 */
export function healthResponder(checks: ReadinessChecks): (request: IncomingMessage, response: ServerResponse) => boolean {
  // One ping at a time: a flood of probes while the database hangs does not pile up queries.
  let pinging: Promise<boolean> | null = null
  const databaseAnswers = (): Promise<boolean> => {
    pinging ??= new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), pingTimeoutMs)
      checks.ping().then(
        () => resolve(true),
        () => resolve(false),
      ).finally(() => clearTimeout(timer))
    }).finally(() => {
      pinging = null
    })
    return pinging
  }

  async function ready(): Promise<boolean> {
    if (checks.closing()) return false
    const queue = checks.logQueue()
    if (queue.queued >= queue.max) return false
    if (!(await databaseAnswers())) return false
    for (const check of checks.extra ?? []) if (!(await check())) return false
    return true
  }

  function answer(response: ServerResponse, request: IncomingMessage, status: number, text: string, degraded: string | null = null): void {
    response.writeHead(status, { ...headers, 'Content-Length': String(text.length), ...(degraded === null ? {} : { 'Keygate-Degraded': degraded }) })
    response.end(request.method === 'HEAD' ? undefined : text)
  }

  return (request, response) => {
    const url = request.url ?? '/'
    const queryAt = url.indexOf('?')
    const path = queryAt === -1 ? url : url.slice(0, queryAt)
    if (path !== '/healthz' && path !== '/readyz') return false
    request.resume()
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.setHeader('Allow', 'GET, HEAD')
      answer(response, request, 405, 'Error: Method not allowed.')
      return true
    }
    if (path === '/healthz') {
      answer(response, request, 200, 'ok')
      return true
    }
    ready().then(
      (isReady) => answer(response, request, isReady ? 200 : 503, isReady ? 'ok' : 'not ready', checks.degraded?.() ?? null),
      () => answer(response, request, 503, 'not ready'),
    )
    return true
  }
}
