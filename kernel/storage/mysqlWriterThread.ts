import { createRequire } from 'node:module'
import type { PoolOptions } from 'mysql2'
import { WriterThread } from './writerThread.ts'
import { overrunCode } from './mysqlTimeLimit.ts'

/** Rows bound to one prepared statement (MySQL takes at most 65,535 placeholders each). */
const rowsPerStatement = 50

/**
 * MySQL's writer thread (writerThread.ts): a pool of its own (the service's options,
 * one connection: batches come one after the other) writes insertMany's batches as
 * prepared multi-row inserts (the binary protocol: values travel as they are, no
 * escaping, no SQL text for the server to parse; each statement text prepared once per
 * connection), all of a batch in one transaction. Bytes for a text column go as they
 * are: the column's utf8mb4 takes them as its text.
 *
 * `limitMs` (database.queryTimeoutMs; 0 = none) bounds each batch, the wait for the
 * connection included: a database that stops answering without closing the connection
 * fails the batch as an outage, which the call log retries, instead of holding it (and
 * every record behind it) until the server speaks again.
 */
export function mysqlWriterThread(options: PoolOptions, limitMs = 0): WriterThread {
  const driver = createRequire(import.meta.url).resolve('mysql2')
  return new WriterThread({
    source: workerSource,
    workerData: { driver, options: { ...options, connectionLimit: 1 }, rowsPerStatement, limitMs, overrunCode },
    // Counted as an outage by isStoreOutage (a lost connection).
    outageCode: 'PROTOCOL_CONNECTION_LOST',
  })
}

const workerSource = `
const { workerData, parentPort } = require('node:worker_threads')
const mysql = require(workerData.driver)
const pool = mysql.createPool(workerData.options).promise()
const quote = (identifier) => '\`' + identifier.replaceAll('\`', '\`\`') + '\`'

// mysql2 sends a Buffer as it is; a plain Uint8Array (as a copy across threads arrives) is made one, without copying.
function asBuffers(values) {
  for (let index = 0; index < values.length; index++) {
    const value = values[index]
    if (value instanceof Uint8Array && !Buffer.isBuffer(value)) values[index] = Buffer.from(value.buffer, value.byteOffset, value.byteLength)
  }
}

// The batch's time limit (mysqlTimeLimit.ts does the same for the request pool): past
// it the batch fails as an outage, and a connection it holds is cut off (its socket
// destroyed with the error, so mysql2 fails the pending command at once and drops the
// connection from the pool; its destroy() would only half-close). A connection that
// comes after the limit goes back unused: the batch has failed and will be sent again.
function limited(work) {
  if (!workerData.limitMs) return work(() => true)
  let over = false
  let held = null
  let timer
  const overrun = new Promise((resolve, reject) => {
    timer = setTimeout(() => {
      over = true
      const error = Object.assign(new Error('a call log batch took more than ' + workerData.limitMs + ' ms: the database does not answer'), { code: workerData.overrunCode })
      if (held) held.connection.stream.destroy(error)
      reject(error)
    }, workerData.limitMs)
  })
  const hold = (connection) => {
    if (over) return false
    held = connection
    return true
  }
  return Promise.race([work(hold), overrun]).finally(() => clearTimeout(timer))
}

async function write(table, columns, values, shared, hold) {
  const width = columns.length
  const head = 'insert into ' + quote(table) + ' (' + columns.map(quote).join(', ') + ') values '
  const tuple = '(' + columns.map(() => '?').join(', ') + ')'
  const chunk = Math.max(1, Math.min(workerData.rowsPerStatement, Math.floor(65535 / width)))
  asBuffers(values)
  if (shared) asBuffers(shared.values)
  const rows = values.length / width
  const connection = await pool.getConnection()
  if (!hold(connection)) return connection.release()
  try {
    await connection.query('start transaction')
    if (shared) {
      // Shared texts (digest, body, keep_until): inserted once, keep_until only raised.
      const upsert = 'insert into ' + quote(shared.table) + ' (digest, body, keep_until) values (?, ?, ?) on duplicate key update keep_until = greatest(keep_until, values(keep_until))'
      for (let index = 0; index < shared.values.length; index += 3) await connection.execute(upsert, shared.values.slice(index, index + 3))
    }
    for (let from = 0; from < rows; from += chunk) {
      const count = Math.min(chunk, rows - from)
      await connection.execute(head + Array(count).fill(tuple).join(', '), values.slice(from * width, (from + count) * width))
    }
    await connection.query('commit')
  } catch (error) {
    await connection.query('rollback').catch(() => undefined)
    throw error
  } finally {
    connection.release()
  }
}

parentPort.on('message', (message) => {
  if (message.close) {
    pool.end().catch(() => undefined).finally(() => process.exit(0))
    return
  }
  const { sequence, table, columns, values, shared } = message
  limited((hold) => write(table, columns, values, shared, hold)).then(
    () => parentPort.postMessage({ sequence }),
    (error) => parentPort.postMessage({ sequence, error: { code: error && error.code, message: String((error && error.message) || error) } }),
  )
})
`
