/**
 * A body is read only for a caller the service may admit (issue 12): an unknown key, a
 * stale date, a key whose ACL does not cover the route, or no credentials at all are
 * refused from the headers alone, before a byte of the body is read, and the
 * connection is closed. A flood of large bodies with a made-up key costs no memory.
 */
import t from 'tap'
import { connect } from 'node:net'
import { execFile } from 'node:child_process'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { insertKey } from './helpers/keys.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'

interface RawAnswer {
  status: number
  head: string
  body: string
  /** The server closed the connection (after its answer). */
  closed: boolean
}

/**
 * Announces `announced` bytes of body but sends only `sent` of them, then waits for the
 * answer: one that comes at all was made without the body.
 */
function partialPost(service: Service, path: string, headers: Record<string, string>, announced: number, sent: number): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(service.port, '127.0.0.1')
    let data = ''
    let answered: Omit<RawAnswer, 'closed'> | null = null
    const timer = setTimeout(() => reject(new Error(`no answer without the body: ${data}`)), 10_000)
    socket.on('data', (chunk) => {
      data += chunk
      const split = data.indexOf('\r\n\r\n')
      if (split === -1) return
      const head = data.slice(0, split)
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0)
      if (data.length - split - 4 >= length) answered = { status: Number(head.split(' ')[1]), head, body: data.slice(split + 4, split + 4 + length) }
    })
    socket.on('error', () => undefined)
    socket.on('close', () => {
      clearTimeout(timer)
      if (answered) resolve({ ...answered, closed: true })
      else reject(new Error(`closed without an answer: ${data}`))
    })
    const lines = Object.entries({ Host: 'x', 'Content-Type': 'application/json', 'Content-Length': String(announced), ...headers }).map(([name, value]) => `${name}: ${value}`)
    socket.write(`POST /v1.0${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`)
    socket.write('{' + ' '.repeat(sent - 1))
  })
}

const eightMiB = 8 * 1024 * 1024
const now = () => new Date().toUTCString()

t.test('refused from the headers alone, the connection closed, nothing logged', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const path = '/People/Update/OnePhoto' // takes up to 8 MiB
    const madeUp = await partialPost(service, path, { 'x-apikey': 'kg_madeup000000000000000', 'x-apidate': now(), 'x-apihmac': 'a'.repeat(64) }, eightMiB, 1024)
    t.equal(madeUp.status, 401)
    t.equal(madeUp.body, 'Error: Unknown or inactive API key.')
    t.match(madeUp.head, /connection: close/i)
    t.ok(madeUp.closed, 'the connection is closed')
    t.notMatch(madeUp.head, /x-requestid/i, 'no caller was established: nothing is logged')

    const stale = await partialPost(service, path, { 'x-apikey': service.admin.apiKey, 'x-apidate': new Date(Date.now() - 3_600_000).toUTCString(), 'x-apihmac': 'a'.repeat(64) }, eightMiB, 1024)
    t.equal(stale.status, 401)
    t.equal(stale.body, 'Error: x-apidate is outside the allowed clock window.')
    t.ok(stale.closed)

    const anonymous = await partialPost(service, path, {}, eightMiB, 1024)
    t.equal(anonymous.status, 401)
    t.equal(anonymous.body, 'Error: Missing credentials: x-apikey, x-apidate and x-apihmac are required.')

    // A real key whose ACL does not cover the route: 403 before the body (and before the
    // signature, which covers the body): not the key's call, so neither logged nor counted.
    const outsider = await insertKey(service, { max_hits: '5/1Min' }, [])
    const refused = await partialPost(service, path, { 'x-apikey': outsider.apiKey, 'x-apidate': now(), 'x-apihmac': 'a'.repeat(64) }, eightMiB, 1024)
    t.equal(refused.status, 403)
    t.equal(refused.body, `Error: Your ACL does not allow ${path}.`)
    t.ok(refused.closed)
    t.notMatch(refused.head, /x-requestid|ratelimit/i)
    const logged = await service.kernel.database.db.selectFrom('api_log').select('id').where('key_id', '=', outsider.id).execute()
    t.equal(logged.length, 0)

    // An admitted caller gets its body read, then its signature checked over it.
    const admitted = await service.call('POST', path, { body: { Id: 1, Photo: 'https://x/1.jpg' }, headers: { 'x-apihmac': 'b'.repeat(64) } })
    t.equal(admitted.status, 401)
    t.equal(admitted.text, 'Error: Signature (x-apihmac) does not match.')
    t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200, 'the service keeps answering')
  }),
)

t.test('40 parallel 8 MiB bodies with a made-up key are never buffered', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const body = Buffer.alloc(eightMiB, 0x20) // one buffer, shared by every client socket
  const baseline = process.memoryUsage().arrayBuffers
  let peak = baseline
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().arrayBuffers)), 5)
  const flood = Array.from({ length: 40 }, () => new Promise<number>((resolve) => {
    const socket = connect(service.port, '127.0.0.1')
    let data = ''
    socket.on('data', (chunk) => (data += chunk))
    socket.on('error', () => undefined)
    socket.on('close', () => resolve(Number(data.split(' ')[1])))
    socket.write(`POST /v1.0/People/Update/OnePhoto HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${eightMiB}\r\nx-apikey: kg_flood0000000000000000\r\nx-apidate: ${now()}\r\nx-apihmac: ${'c'.repeat(64)}\r\n\r\n`)
    socket.write(body)
  }))
  const statuses = await Promise.all(flood)
  clearInterval(sampler)
  t.same([...new Set(statuses)], [401], 'every one refused')
  // Buffering them would hold 40 x 8 MiB = 320 MiB of bodies; the client's one buffer is 8 MiB.
  const grownMiB = (peak - baseline) / 1024 / 1024
  t.ok(grownMiB < 64, `buffers grew by ${grownMiB.toFixed(1)} MiB during the flood`)
  t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200, 'the service keeps answering')
})

/**
 * A client in its own process (in this one it would read the answer in the very tick the
 * server closes) sends the whole body in one write with node:http, as most clients do,
 * 20 times, and reads each answer: the refusal must arrive in full although the client
 * was still sending when it was written (a lingering close; a reset gave the client
 * EPIPE or ECONNRESET instead).
 */
const wholePostClient = `
const { request } = require('node:http')
const [port, path, headers, size] = [Number(process.argv[1]), process.argv[2], JSON.parse(process.argv[3]), Number(process.argv[4])]
const body = Buffer.alloc(size, 0x20)
const once = () => new Promise((resolve) => {
  const sent = request({ host: '127.0.0.1', port, method: 'POST', path, agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': String(size), ...headers } }, (response) => {
    let text = ''
    response.on('data', (chunk) => (text += chunk))
    response.on('end', () => resolve(response.statusCode + ' ' + text))
    response.on('error', (error) => resolve(response.statusCode + ' ' + text + ' <' + error.code + '>'))
  })
  sent.on('error', (error) => resolve('<' + error.code + '>'))
  sent.end(body)
})
;(async () => {
  const seen = []
  for (let round = 0; round < 20; round++) seen.push(await once())
  process.stdout.write(JSON.stringify(seen))
})()
`

function wholePosts(service: Service, path: string, headers: Record<string, string>, size: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', wholePostClient, String(service.port), `/v1.0${path}`, JSON.stringify(headers), String(size)], { timeout: 60_000 }, (error, stdout) => {
      if (error) reject(error)
      else resolve(JSON.parse(stdout) as string[])
    })
  })
}

t.test('a client still sending its body reads the whole refusal (lingering close)', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  // 8 MiB, the largest body a default route takes: most clients got EPIPE or a reset before.
  const size = 8 * 1024 * 1024
  const tally = (label: string, expected: RegExp, seen: string[]) => {
    const answered = seen.filter((answer) => expected.test(answer)).length
    t.equal(answered, 20, `${label}: ${answered} of 20 read the refusal (first other: ${JSON.stringify(seen.find((answer) => !expected.test(answer)))})`)
  }
  // 413: a signed call to a route of the default 1 MiB limit.
  tally('413', /^413 Error: Request body is larger than 1048576 bytes\.$/,
    await wholePosts(service, '/Api/Read/Acl', { 'x-apikey': service.admin.apiKey, 'x-apidate': now(), 'x-apihmac': 'a'.repeat(64) }, size))
  // The early 401 of a made-up key: refused before a byte of the body is read.
  tally('401', /^401 Error: Unknown or inactive API key\.$/,
    await wholePosts(service, '/People/Update/OneChange', { 'x-apikey': 'kg_madeup000000000000000', 'x-apidate': now(), 'x-apihmac': 'a'.repeat(64) }, size))
  t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200, 'the service keeps answering')
})

/**
 * Announces a 1 GiB body (by default with a made-up key, to OnePhoto) and writes `chunk`
 * bytes every `everyMs` until the server closes, or for 10 s; ms from the answer to the
 * close (-1: no answer, -2: still open after 10 s).
 */
async function keepSending(service: Service, chunk: number, everyMs: number, requestLine = 'POST /v1.0/People/Update/OnePhoto', credentials = true): Promise<{ data: string; lingered: number }> {
  // Half-open: this client keeps sending after the server's FIN, as a careless one would.
  const socket = connect({ port: service.port, host: '127.0.0.1', allowHalfOpen: true })
  let data = ''
  let answeredAt = 0
  socket.on('data', (received) => {
    data += received
    if (answeredAt === 0 && data.includes('\r\n\r\n')) answeredAt = Date.now()
  })
  socket.on('error', () => undefined)
  const keyLines = credentials ? `x-apikey: kg_madeup000000000000000\r\nx-apidate: ${now()}\r\nx-apihmac: ${'a'.repeat(64)}\r\n` : ''
  socket.write(`${requestLine} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${1024 * 1024 * 1024}\r\n${keyLines}\r\n`)
  const body = Buffer.alloc(chunk, 0x20)
  const sender = setInterval(() => socket.writable && socket.writableLength < chunk && socket.write(body), everyMs)
  const closed = await Promise.race([new Promise((resolve) => socket.once('close', () => resolve(true))), new Promise((resolve) => setTimeout(() => resolve(false), 10_000))])
  clearInterval(sender)
  socket.destroy()
  return { data, lingered: !closed ? -2 : answeredAt === 0 ? -1 : Date.now() - answeredAt }
}

t.test('a client that keeps sending after the refusal is cut off by the lingering bounds', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  // 16 KiB every 20 ms never reaches the byte bound: the time bound (1 s) ends it.
  const slow = await keepSending(service, 16 * 1024, 20)
  t.match(slow.data, /^HTTP\/1\.1 401 [^]*Error: Unknown or inactive API key\.$/)
  t.ok(slow.lingered >= 900 && slow.lingered < 3000, `a slow sender: closed ${slow.lingered} ms after the answer`)
  // As fast as it can: the byte bound (8 MiB) ends it well before the second.
  const fast = await keepSending(service, 1024 * 1024, 1)
  t.match(fast.data, /^HTTP\/1\.1 401 [^]*Error: Unknown or inactive API key\.$/)
  t.ok(fast.lingered >= 0 && fast.lingered < 800, `a fast sender: closed ${fast.lingered} ms after the answer`)
  t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200, 'the service keeps answering')
})

t.test('a body nothing reads (no route, a wrong method, a health probe, the console) is cut off by the lingering bounds too', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  // node:http drained such a body to keep the connection: gigabytes, for as long as the
  // client sent (up to timeouts.requestMs), with no key and no route.
  for (const [requestLine, status] of [['POST /v1.0/No/Such/Route', 404], ['PUT /v1.0/Api/Read/Log', 404], ['POST /NotUnderTheBasePath', 404], ['GET /healthz', 200], ['POST /readyz', 405], ['GET /console/', 200]] as const) {
    const sent = await keepSending(service, 1024 * 1024, 1, requestLine, false)
    t.match(sent.data, new RegExp(`^HTTP/1\\.1 ${status} [^]*\\r\\nconnection: close\\r\\n`, 'i'), `${requestLine}: ${status}, the connection closing`)
    t.ok(sent.lingered >= 0 && sent.lingered < 800, `${requestLine}: closed ${sent.lingered} ms after the answer`)
  }
  // Without a body the connection is kept, as before.
  const plain = await fetch(`${service.base}/No/Such/Route`)
  t.equal(plain.status, 404)
  t.equal(plain.headers.get('connection'), 'keep-alive')
  t.equal(await plain.text(), 'Error: Not found.')
  t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200, 'the service keeps answering')
})

/**
 * Sends the head with `Expect: 100-continue` and waits as the client would: the body goes
 * only after 100 Continue (or after `fallbackMs` without any answer, as curl does after 1 s).
 * Everything the server wrote, and whether the body was sent.
 */
function expectingPost(service: Service, path: string, headers: Record<string, string>, body: string, fallbackMs = 3000): Promise<{ data: string; bodySent: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(service.port, '127.0.0.1')
    let data = ''
    let bodySent = false
    const sendBody = () => {
      if (bodySent || !socket.writable) return
      bodySent = true
      socket.write(body)
    }
    const fallback = setTimeout(sendBody, fallbackMs)
    socket.on('data', (chunk) => {
      data += chunk
      if (data.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) sendBody()
      const final = data.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '')
      const split = final.indexOf('\r\n\r\n')
      if (split !== -1 && final.length - split - 4 >= Number(/content-length: (\d+)/i.exec(final)?.[1] ?? 0)) socket.end()
    })
    socket.on('error', () => undefined)
    socket.on('close', () => {
      clearTimeout(fallback)
      resolve({ data, bodySent })
    })
    const lines = Object.entries({ Host: 'x', 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)), ...headers }).map(([name, value]) => `${name}: ${value}`)
    socket.write(`POST /v1.0${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`)
  })
}

t.test('Expect: 100-continue is answered 100 only once the headers pass; another expectation is 417', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const expect = { Expect: '100-continue' }
  const madeUp = await expectingPost(service, '/People/Update/OneChange', { ...expect, 'x-apikey': 'kg_madeup000000000000000', 'x-apidate': now(), 'x-apihmac': 'a'.repeat(64) }, '{"FirstName":"x"}')
  t.match(madeUp.data, /^HTTP\/1\.1 401 [^]*\r\nconnection: close\r\n[^]*\r\n\r\nError: Unknown or inactive API key\.$/i, 'refused with no 100 Continue before it')
  t.notOk(madeUp.bodySent, 'the body was never asked for')
  const stale = await expectingPost(service, '/People/Update/OneChange', { ...expect, 'x-apikey': service.admin.apiKey, 'x-apidate': 'Sun, 22 Nov 2020 08:49:37 GMT', 'x-apihmac': 'a'.repeat(64) }, '{"FirstName":"x"}')
  t.match(stale.data, /^HTTP\/1\.1 401 [^]*\r\n\r\nError: x-apidate is outside the allowed clock window\.$/)
  t.notOk(stale.bodySent)
  const tooLarge = await expectingPost(service, '/Api/Read/Acl', { ...expect, 'x-apikey': service.admin.apiKey, 'x-apidate': now(), 'x-apihmac': 'a'.repeat(64), 'Content-Length': String(2 * 1024 * 1024) }, '{}')
  t.match(tooLarge.data, /^HTTP\/1\.1 413 [^]*\r\n\r\nError: Request body is larger than 1048576 bytes\.$/, 'a 413 by Content-Length: no 100 either')
  t.notOk(tooLarge.bodySent)
  const unrouted = await expectingPost(service, '/No/Such/Route', expect, '{}')
  t.match(unrouted.data, /^HTTP\/1\.1 404 [^]*\r\nconnection: close\r\n[^]*Error: Not found\.$/i)
  t.notOk(unrouted.bodySent)

  // An admitted caller is asked for its body, and served.
  const body = '{}'
  const admitted = await expectingPost(service, '/Api/Read/Acl', { ...expect, ...signedHeaders(service.admin, 'POST', '/Api/Read/Acl', body) }, body)
  t.ok(admitted.bodySent)
  t.match(admitted.data, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /)

  const other = await expectingPost(service, '/Api/Read/Acl', { Expect: 'something-else' }, '{}')
  t.match(other.data, /^HTTP\/1\.1 417 [^]*\r\ncontent-type: text\/plain; charset=utf-8\r\n[^]*\r\n\r\nError: Expect: 100-continue is the only expectation this service meets\.$/i)
  t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200, 'the service keeps answering')
})
