/** A webhook receiver on a loopback port for tests: keeps what arrives, can go down and come back on the same port. */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import type { Config } from '../../kernel/boot/config.ts'

/** Deliveries to loopback over http, in milliseconds rather than seconds: the same backoff, shorter. */
export const fastWebhooks: Partial<Config> = {
  webhooks: { allowHttp: true, allowAddresses: ['127.0.0.1'], timeoutMs: 2000, firstRetryMs: 100, maxRetryDelayMs: 400, retryForMs: 86_400_000, pollMs: 50, maxPerTenant: 20 },
  events: { expiryScanMs: 100 },
}

export interface Received {
  id: string
  timestamp: string
  signature: string
  body: string
  json: { type: string; timestamp: string; data: Record<string, unknown> }
}

export interface Receiver {
  readonly url: string
  readonly port: number
  readonly received: Received[]
  /** Every attempt that reached it, answered or not. */
  attempts: number
  /** The webhook-id of every attempt that reached it, in order. */
  readonly attemptIds: string[]
  /** The status it answers (default 200). */
  status: number
  /** Stops listening (connections refused) until `up`. */
  down(): Promise<void>
  up(): Promise<void>
  /** Waits until `count` deliveries matching `filter` have arrived (10 s at most). */
  waitFor(count: number, filter?: (received: Received) => boolean): Promise<Received[]>
}

export async function startReceiver(t: Test, port = 0): Promise<Receiver> {
  let server: Server
  const receiver: Receiver = {
    url: '',
    port: 0,
    received: [],
    attempts: 0,
    attemptIds: [],
    status: 200,
    async down() {
      await new Promise((done) => {
        server.close(done)
        server.closeAllConnections()
      })
    },
    async up() {
      server = makeServer()
      await new Promise<void>((done) => server.listen(receiver.port, '127.0.0.1', done))
    },
    async waitFor(count, filter = () => true) {
      const since = Date.now()
      while (receiver.received.filter(filter).length < count) {
        if (Date.now() - since > 10_000) throw new Error(`waited for ${count} deliveries; got ${JSON.stringify(receiver.received.map((item) => item.json.type))}`)
        await new Promise((done) => setTimeout(done, 20))
      }
      return receiver.received.filter(filter)
    },
  }
  const makeServer = () => createServer((request, response) => {
    receiver.attempts++
    receiver.attemptIds.push(String(request.headers['webhook-id']))
    const chunks: Buffer[] = []
    request.on('data', (chunk) => chunks.push(chunk))
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      if (receiver.status >= 200 && receiver.status < 300) {
        receiver.received.push({
          id: String(request.headers['webhook-id']),
          timestamp: String(request.headers['webhook-timestamp']),
          signature: String(request.headers['webhook-signature']),
          body,
          json: JSON.parse(body),
        })
      }
      response.writeHead(receiver.status).end()
    })
  })
  server = makeServer()
  await new Promise<void>((done) => server.listen(port, '127.0.0.1', done))
  const bound = (server.address() as AddressInfo).port
  Object.assign(receiver, { port: bound, url: `http://127.0.0.1:${bound}/hook` })
  t.teardown(() => new Promise((done) => {
    server.close(done)
    server.closeAllConnections()
  }))
  return receiver
}
