import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import type SQLite from 'better-sqlite3'

/**
 * SQLite's WAL checkpoint, off the request thread (issue 19, goal 2). By default the
 * connection that commits past 1000 WAL pages copies them into the database file and
 * syncs it, inside that commit: with the call log writing a row per call, the event loop
 * stood still for it (half the wall time of a log batch at LogLevel 2). Here the
 * kernel's connection never checkpoints by itself; a worker thread with a connection of
 * its own runs a PASSIVE checkpoint every `everyMs` (it never blocks a writer). Should
 * the worker fail, the connection checkpoints by itself again.
 */
export class WalCheckpointer {
  private readonly worker: Worker

  constructor(file: SQLite.Database, path: string, everyMs = 200) {
    file.pragma('wal_autocheckpoint = 0')
    // Eval'd worker code is CommonJS: it is given the driver's resolved path.
    const driver = createRequire(import.meta.url).resolve('better-sqlite3')
    this.worker = new Worker(workerSource, { eval: true, workerData: { driver, path, everyMs } })
    this.worker.unref()
    const fallBack = () => {
      if (file.open) file.pragma('wal_autocheckpoint = 1000')
    }
    this.worker.on('error', fallBack)
    this.worker.on('exit', (code) => code !== 0 && fallBack())
  }

  async stop(): Promise<void> {
    await this.worker.terminate()
  }
}

const workerSource = `
const { workerData } = require('node:worker_threads')
const SQLite = require(workerData.driver)
const file = new SQLite(workerData.path)
file.pragma('busy_timeout = 5000')
setInterval(() => file.pragma('wal_checkpoint(PASSIVE)'), workerData.everyMs)
`
