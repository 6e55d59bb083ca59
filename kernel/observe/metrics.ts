/**
 * Prometheus metrics of one kernel instance, served on their own listener
 * (`metrics.port`, `metrics.host` default 127.0.0.1; port 0 = off). The instance owns its
 * Registry (never prom-client's global one): tests run several kernels in one process.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import { answerPrimary, ClusterMetrics } from './clusterMetrics.ts'
import type { Exchange } from '../http/exchange.ts'
import type { Stage } from '../http/pipeline.ts'
import { isStoreOutage } from '../storage/database.ts'
import type { ErrorReport } from './logger.ts'

function isDatabaseError(error: unknown): boolean {
  if (isStoreOutage(error)) return true
  const code = (error as { code?: unknown })?.code
  return typeof code === 'string' && (code.startsWith('ER_') || code.startsWith('SQLITE_'))
}

export interface MetricsSources {
  /** Records waiting in the call-log queue (read at each scrape). */
  logQueued: () => number
  /** The queue's bound (log.queueMax). */
  logQueueMax: number
}

export class KernelMetrics {
  readonly registry = new Registry()
  private readonly calls: Counter<'route' | 'method' | 'status'>
  private readonly latency: Histogram<'route' | 'method'>
  private readonly authRefusals: Counter<'reason'>
  private readonly rateLimitRefusals: Counter<'route'>
  private readonly creditRefusals: Counter<'route'>
  private readonly cacheLookups: Counter<'route'>
  private readonly cacheHits: Counter<'route'>
  private readonly flushSeconds: Histogram
  private readonly databaseErrors: Counter
  private readonly callCounters = new Map<string, ReturnType<Counter<'route' | 'method' | 'status'>['labels']>>()
  private readonly latencyHistograms = new Map<string, ReturnType<Histogram<'route' | 'method'>['labels']>>()
  private server: Server | null = null

  constructor(sources: MetricsSources, version: string) {
    const registers = [this.registry]
    this.calls = new Counter({ name: 'keygate_http_requests_total', help: 'Answered calls by canonical route, method and status.', labelNames: ['route', 'method', 'status'], registers })
    this.latency = new Histogram({
      name: 'keygate_http_request_duration_seconds', help: 'Time from the request to its answer, by canonical route and method.', labelNames: ['route', 'method'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5], registers,
    })
    this.authRefusals = new Counter({ name: 'keygate_auth_refusals_total', help: 'Calls refused with 401 (and day-code lockouts), by reason.', labelNames: ['reason'], registers })
    this.rateLimitRefusals = new Counter({ name: 'keygate_rate_limit_refusals_total', help: 'Calls refused with 429 by a MaxHits window, by canonical route.', labelNames: ['route'], registers })
    this.creditRefusals = new Counter({ name: 'keygate_credit_refusals_total', help: 'Calls refused with 429 because their key has no credits left, by canonical route.', labelNames: ['route'], registers })
    this.cacheLookups = new Counter({ name: 'keygate_response_cache_lookups_total', help: 'Calls of a cached route that looked in the response cache.', labelNames: ['route'], registers })
    this.cacheHits = new Counter({ name: 'keygate_response_cache_hits_total', help: 'Calls answered from the response cache.', labelNames: ['route'], registers })
    this.flushSeconds = new Histogram({ name: 'keygate_call_log_flush_seconds', help: 'Time to write one batch of call-log records.', buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5], registers })
    this.databaseErrors = new Counter({ name: 'keygate_database_errors_total', help: 'Database errors and outages seen by the service (calls answered 503, failed log writes).', registers })
    new Gauge({
      name: 'keygate_call_log_queue_depth', help: 'Call-log records waiting to be written.', registers,
      collect() {
        this.set(sources.logQueued())
      },
    })
    new Gauge({ name: 'keygate_call_log_queue_max', help: 'The bound of the call-log queue (log.queueMax).', registers }).set(sources.logQueueMax)
    // 'max': with WORKERS the primary adds the workers' registries up; the version is one.
    new Gauge({ name: 'keygate_info', help: 'The running version.', labelNames: ['version'], registers, aggregator: 'max' }).set({ version }, 1)
  }

  /** The per-call observer: counts and times every call that reached a route. */
  stage(): Stage {
    return {
      name: 'metrics',
      after: (exchange: Exchange) => {
        const answer = exchange.answer
        if (answer === null) return
        const route = exchange.mounted.route.path
        const method = exchange.request.method ?? 'GET'
        // Labelled children are looked up once per route, method and status, not per call.
        const callKey = `${exchange.mounted.id} ${method} ${answer.status}`
        let calls = this.callCounters.get(callKey)
        if (calls === undefined) this.callCounters.set(callKey, (calls = this.calls.labels({ route, method, status: String(answer.status) })))
        calls.inc()
        const latencyKey = `${exchange.mounted.id} ${method}`
        let latency = this.latencyHistograms.get(latencyKey)
        if (latency === undefined) this.latencyHistograms.set(latencyKey, (latency = this.latency.labels({ route, method })))
        latency.observe((performance.now() - exchange.startedTick) / 1000)
        // By the reason the refusing stage named (kernel/http/errors.ts Refusal); a plugin's own 401 is 'other'.
        const refusal = exchange.refusal
        if (answer.status === 401 || refusal === 'day_code_lockout') this.authRefusals.inc({ reason: refusal ?? 'other' })
        else if (refusal === 'rate_limit') this.rateLimitRefusals.inc({ route })
        else if (refusal === 'credits') this.creditRefusals.inc({ route })
        if (exchange.cacheKey !== null) {
          this.cacheLookups.inc({ route })
          if (answer.headers.some(([name, value]) => name === 'X-Cache' && value === 'HIT')) this.cacheHits.inc({ route })
        }
      },
    }
  }

  /** Wraps the kernel's error report: database errors are counted, then reported as before. */
  observeReport(report: ErrorReport): ErrorReport {
    return (error, context) => {
      if (isDatabaseError(error)) this.databaseErrors.inc()
      report(error, context)
    }
  }

  observeFlush(seconds: number): void {
    this.flushSeconds.observe(seconds)
  }

  /** Starts the metrics listener when a port is configured; resolves with its port (0 = off). */
  listen(options: { port: number; host: string } | undefined): Promise<number> {
    if (!options || options.port === 0 || this.server) return Promise.resolve(this.server ? (this.server.address() as AddressInfo).port : 0)
    // Only with a listener: the process collectors install GC and event-loop observers
    // that live as long as the process, which kernels that nobody scrapes do not need.
    collectDefaultMetrics({ register: this.registry })
    const server = metricsServer(() => this.registry.metrics(), this.registry.contentType)
    this.server = server
    return listenOn(server, options)
  }

  /**
   * In a cluster worker (WORKERS > 1): no listener of its own; the primary's listener
   * (listenAggregated) asks every worker for its registry over node:cluster's IPC and
   * answers their sum, so one scrape counts every call of the host.
   */
  reportToPrimary(options: { port: number; host: string } | undefined): void {
    if (!options || options.port === 0) return
    collectDefaultMetrics({ register: this.registry })
    answerPrimary(this.registry)
  }

  close(): Promise<void> {
    const server = this.server
    this.server = null
    if (!server) return Promise.resolve()
    return new Promise((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  }
}

/**
 * The metrics listener. A scrape that cannot be answered (with WORKERS, a worker that
 * has never answered the primary) is a 503 the scraper records as a failed scrape, and
 * a line in the service log, so the operator learns why `up` went to 0.
 */
function metricsServer(text: () => Promise<string>, contentType: string, failed: (error: unknown) => void = () => {}): Server {
  return createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0]
    if ((request.method !== 'GET' && request.method !== 'HEAD') || path !== '/metrics') {
      response.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Error: Not found.')
      return
    }
    text().then(
      (body) => response.writeHead(200, { 'Content-Type': contentType }).end(request.method === 'HEAD' ? undefined : body),
      (error) => {
        failed(error)
        response.writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8', 'Retry-After': '5' }).end('Error: Metrics unavailable, try again shortly.')
      },
    )
  })
}

function listenOn(server: Server, options: { port: number; host: string }): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port, options.host, () => {
      server.off('error', reject)
      resolve((server.address() as AddressInfo).port)
    })
  })
}

/**
 * The metrics listener of a WORKERS > 1 primary: every scrape sums the live workers'
 * registries (KernelMetrics.reportToPrimary, kernel/observe/clusterMetrics.ts), counters
 * and histograms added up, so the numbers never jump back and forth between workers; a
 * worker that does not answer in time is served from its last answer (`unanswered` says
 * which). Resolves with a close function.
 */
export async function listenAggregated(options: { port: number; host: string }, reports: { failed: (error: unknown) => void; unanswered: (workerPids: number[]) => void }): Promise<() => Promise<void>> {
  const workers = new ClusterMetrics(reports.unanswered)
  const server = metricsServer(() => workers.scrape(), workers.contentType, reports.failed)
  try {
    await listenOn(server, options)
  } catch (error) {
    workers.close()
    throw error
  }
  return () => new Promise((resolve) => {
    workers.close()
    server.close(() => resolve())
    server.closeAllConnections()
  })
}
