/**
 * Metrics of a WORKERS > 1 host: the primary asks every worker for its registry over
 * node:cluster's channel and answers one scrape with their sum (prom-client's
 * aggregators: counters and histograms add up, `keygate_info` is the max).
 *
 * A worker that does not answer within `answerMs` (frozen, or busy that long) keeps the
 * numbers it answered last: its counters stand still for a scrape instead of leaving the
 * sum, which Prometheus would read as a counter reset, and the host's other workers are
 * still seen. `keygate_metrics_workers_unanswered` says how many were so served. Only a
 * worker that never answered (just started) fails the scrape, as there is nothing of it
 * to serve.
 */
import cluster, { type Worker } from 'node:cluster'
import { AggregatorRegistry, Gauge, Registry } from 'prom-client'

/** One registry's metrics as `getMetricsAsJSON()` gives them (and IPC carries them). */
type RegistryJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>

interface MetricsRequest { type: 'keygate:metrics'; id: number }
interface MetricsReply { type: 'keygate:metrics-reply'; id: number; metrics: RegistryJson }

/** A worker's side: answers the primary's requests with this registry (once per process). */
export function answerPrimary(registry: Registry): void {
  process.on('message', (message: MetricsRequest) => {
    if (message?.type !== 'keygate:metrics') return
    // Unanswered (a collector that failed), the primary serves this worker's last numbers.
    registry.getMetricsAsJSON().then((metrics) => {
      if (process.connected) process.send!({ type: 'keygate:metrics-reply', id: message.id, metrics } satisfies MetricsReply)
    }, () => {})
  })
}

/** A scrape no worker's numbers could be given for: a worker that has never answered. */
export class UnansweredWorkers extends Error {}

/** The primary's side: one `scrape()` per request to its listener. */
export class ClusterMetrics {
  readonly contentType = Registry.PROMETHEUS_CONTENT_TYPE
  private nextId = 0
  private readonly waiting = new Map<number, { worker: Worker; resolve: (metrics: RegistryJson | null) => void }>()
  /** Each live worker's last answer, by cluster worker id (a restarted worker is a new id). */
  private readonly lastAnswers = new Map<number, RegistryJson>()
  private readonly onMessage = (worker: Worker, message: MetricsReply) => {
    if (message?.type !== 'keygate:metrics-reply') return
    const request = this.waiting.get(message.id)
    if (request?.worker !== worker) return
    this.waiting.delete(message.id)
    request.resolve(message.metrics)
  }

  constructor(
    /** Told which workers (their pids) were served from their last answer. */
    private readonly unanswered: (workerPids: number[]) => void,
    private readonly answerMs = 5000,
  ) {
    cluster.on('message', this.onMessage)
  }

  async scrape(): Promise<string> {
    const workers = Object.values(cluster.workers ?? {}).filter((worker): worker is Worker => worker !== undefined && worker.isConnected())
    for (const id of this.lastAnswers.keys()) if (!workers.some((worker) => worker.id === id)) this.lastAnswers.delete(id)
    const answers = await Promise.all(workers.map((worker) => this.ask(worker)))
    const late = workers.filter((_, index) => answers[index] === null)
    const pid = (worker: Worker) => worker.process.pid ?? worker.id
    const never = late.filter((worker) => !this.lastAnswers.has(worker.id))
    if (never.length > 0) throw new UnansweredWorkers(`worker ${never.map(pid).join(', ')} (pid) has not answered a scrape yet`)
    workers.forEach((worker, index) => {
      const answer = answers[index]
      if (answer !== null) this.lastAnswers.set(worker.id, answer)
    })
    if (late.length > 0) this.unanswered(late.map(pid))
    const sum = AggregatorRegistry.aggregate(workers.map((worker) => this.lastAnswers.get(worker.id)!))
    new Gauge({ name: 'keygate_metrics_workers_unanswered', help: 'Workers that did not answer this scrape in time; their last numbers were served.', registers: [sum] }).set(late.length)
    return sum.metrics()
  }

  close(): void {
    cluster.off('message', this.onMessage)
    for (const request of this.waiting.values()) request.resolve(null)
    this.waiting.clear()
  }

  /** One worker's registry, or null when it does not answer within `answerMs`. */
  private ask(worker: Worker): Promise<RegistryJson | null> {
    const id = this.nextId++
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(null), this.answerMs)
      const finish = (metrics: RegistryJson | null) => {
        clearTimeout(timer)
        this.waiting.delete(id)
        resolve(metrics)
      }
      this.waiting.set(id, { worker, resolve: finish })
      // A channel that closed meanwhile (the worker exiting) is a worker that did not answer.
      worker.send({ type: 'keygate:metrics', id } satisfies MetricsRequest, undefined, undefined, (error) => {
        if (error) finish(null)
      })
    })
  }
}
