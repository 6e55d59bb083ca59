import { Worker } from 'node:worker_threads'

/**
 * What runs in a writer thread: CommonJS source (eval'd, so the same under tsx and from
 * dist/) that answers each `{ sequence, table, columns, values, shared? }` (shared: `{
 * table, values }`, flat digest, body, keep_until triples to upsert in the same
 * transaction, keep_until only raised) with `{ sequence }`
 * once the rows are committed, or `{ sequence, error: { code, message } }`, and ends
 * itself on `{ close: true }`.
 */
export interface WriterThreadSource {
  source: string
  workerData: unknown
  /** The code a lost thread's batches fail with: one that isStoreOutage counts as an outage. */
  outageCode: string
  /** Told when a thread starts and when one is lost (SQLite hands its checkpoints over and back). */
  started?: () => void
  lost?: () => void
}

interface Waiting {
  resolve: () => void
  reject: (error: Error) => void
}

/**
 * The database's bulk writes, off the request thread (issue 19, goals 1 and 2): a
 * worker thread with a connection of its own writes Database.insertMany's batches (the
 * call log). The request thread hands over one flat array of values per batch (about
 * 1 µs a row at LogLevel 0, 4 at level 2) instead of binding, encoding and writing them.
 *
 * A batch is one transaction, written whole or not at all; its error comes back with
 * the driver's code, so the call log tells an outage (retried) from a bad row (written
 * row by row) as before. Should the thread die, the batches it held fail as an outage
 * and the next batch starts a new thread. The thread keeps the process alive only while
 * a batch is out, so a shutdown awaits it and an idle service exits as before.
 */
export class WriterThread {
  private worker: Worker | null = null
  private readonly waiting = new Map<number, Waiting>()
  private sequence = 0
  private stopped = false

  constructor(private readonly thread: WriterThreadSource) {}

  /** Starts the thread now rather than with the first batch. */
  start(): void {
    if (!this.worker && !this.stopped) this.spawn()
  }

  /** Writes `values` (rows of `columns.length` values each, flat) into `table`, in one transaction. */
  insert(table: string, columns: readonly string[], values: readonly unknown[], shared?: { table: string; values: readonly unknown[] }): Promise<void> {
    if (this.stopped) return Promise.reject(this.outage('the writer thread is stopped'))
    const worker = this.worker ?? this.spawn()
    const sequence = ++this.sequence
    return new Promise<void>((resolve, reject) => {
      if (this.waiting.size === 0) worker.ref()
      this.waiting.set(sequence, { resolve, reject })
      worker.postMessage({ sequence, table, columns, values, shared })
    })
  }

  /** Lets a batch still out finish (the call log is flushed before the database closes), then ends the thread. */
  async stop(): Promise<void> {
    this.stopped = true
    const worker = this.worker
    if (!worker) return
    const giveUpAt = Date.now() + 10_000
    while (this.waiting.size > 0 && Date.now() < giveUpAt) await new Promise((resolve) => setTimeout(resolve, 5))
    // Died meanwhile: its batches have failed already, and its exit is past.
    if (this.worker !== worker) return
    this.worker = null
    // The thread closes its connection itself (a server sees a clean goodbye); one that does not is ended.
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
    // Held until it has exited: an idle thread is unref'd, and its exit must still be awaited.
    worker.ref()
    worker.postMessage({ close: true })
    const timer = setTimeout(() => void worker.terminate(), 2000)
    await exited
    clearTimeout(timer)
    for (const waiting of this.waiting.values()) waiting.reject(this.outage('the writer thread was stopped before this batch was written'))
    this.waiting.clear()
  }

  private spawn(): Worker {
    this.thread.started?.()
    // Plain CommonJS of its own, given absolute paths: none of the process's flags (a
    // loader such as tsx, --input-type=module for `node -e`) may change how it is read.
    const worker = new Worker(this.thread.source, { eval: true, workerData: this.thread.workerData, execArgv: [] })
    worker.on('message', (answer: { sequence: number; error?: { code?: string; message: string } }) => {
      const waiting = this.waiting.get(answer.sequence)
      if (!waiting) return
      this.waiting.delete(answer.sequence)
      if (this.waiting.size === 0) worker.unref()
      if (answer.error) waiting.reject(Object.assign(new Error(answer.error.message), { code: answer.error.code }))
      else waiting.resolve()
    })
    const lost = (reason: string) => {
      if (this.worker !== worker) return
      this.worker = null
      this.thread.lost?.()
      for (const waiting of this.waiting.values()) waiting.reject(this.outage(`the writer thread stopped: ${reason}`))
      this.waiting.clear()
    }
    worker.on('error', (error) => lost(error.message))
    worker.on('exit', (code) => lost(`exit code ${code}`))
    // After the listeners: attaching a 'message' listener refs the thread again.
    worker.unref()
    this.worker = worker
    return worker
  }

  private outage(message: string): Error {
    return Object.assign(new Error(message), { code: this.thread.outageCode })
  }
}
