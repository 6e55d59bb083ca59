/** Signed load with autocannon, and the table rows it yields. */
import autocannon from 'autocannon'
import { signedHeaders, type SigningKey } from '../../kernel/auth/signature.ts'
import { connections, seconds } from './settings.ts'
import { cpuSeconds } from './processes.ts'

export interface Row {
  scenario: string
  requestsPerSecond: number
  p50: number
  p99: number
  ratioToBare: number | null
  non2xx: number
  errors: number
  /** Cores the load generator (this process) kept busy during the run. */
  clientCores?: number
  /** CPU (user + system) the server process used per answered call, in µs; when its pid was given. */
  serverMicrosPerCall?: number
  note?: string
}

/** A measured run: autocannon's result and the client's own CPU use during it. */
export interface Measured {
  result: autocannon.Result
  clientCores: number
  serverMicrosPerCall?: number
}

/** A signed call outside the load (setup). */
export async function call(base: string, key: SigningKey, method: string, path: string, body?: unknown, today?: string): Promise<{ status: number; json: any; text: string; headers: Headers }> {
  const raw = body === undefined ? undefined : JSON.stringify(body)
  const headers: Record<string, string> = signedHeaders(key, method, path, raw, { today })
  if (raw) headers['content-type'] = 'application/json'
  const response = await fetch(base + path, { method, headers, body: raw })
  const text = await response.text()
  let json: unknown = text
  try {
    json = JSON.parse(text)
  } catch {
    // plain text errors stay text
  }
  if (response.status >= 400) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return { status: response.status, json, text, headers: response.headers }
}

export interface Load {
  method: 'GET' | 'POST'
  path: string
  /** Called per request: the key and body to use. */
  next?: () => { key: SigningKey; body?: string; today?: string }
  key?: SigningKey
  body?: string
  headers?: Record<string, string>
}

/** Every request signed; with one key the signature is reused within its second, as a real client may. */
/** `serverPid`: the process whose CPU per call is reported (the profiler's own figures count time the process was descheduled). */
export async function measure(url: string | string[], load: Load, limits: { seconds?: number; amount?: number; serverPid?: number } = {}): Promise<Measured> {
  let second = -1
  let signed: Record<string, string> = {}
  const requests = [{
    method: load.method,
    setupRequest(request: any) {
      if (load.next) {
        const { key, body, today } = load.next()
        request.headers = { ...load.headers, ...signedHeaders(key, load.method, load.path, body, { today }), ...(body ? { 'content-type': 'application/json' } : {}) }
        request.body = body
        return request
      }
      const now = Math.floor(Date.now() / 1000)
      if (now !== second) {
        second = now
        signed = { ...load.headers, ...signedHeaders(load.key!, load.method, load.path, load.body), ...(load.body ? { 'content-type': 'application/json' } : {}) }
      }
      request.headers = signed
      request.body = load.body
      return request
    },
  }]
  const cpuBefore = process.cpuUsage()
  const serverBefore = limits.serverPid ? cpuSeconds(limits.serverPid) : 0
  const startedAt = performance.now()
  const result = await autocannon({ url: url as string, connections, duration: limits.seconds ?? seconds, amount: limits.amount, requests })
  const cpu = process.cpuUsage(cpuBefore)
  const clientCores = Math.round(((cpu.user + cpu.system) / 1000 / (performance.now() - startedAt)) * 100) / 100
  const serverMicrosPerCall = limits.serverPid ? Math.round(((cpuSeconds(limits.serverPid) - serverBefore) * 1e6) / Math.max(1, result.requests.total)) : undefined
  return { result, clientCores, serverMicrosPerCall }
}

export function summarise(scenario: string, measured: Measured, bare: number | null, note?: string): Row {
  const { result, clientCores, serverMicrosPerCall } = measured
  const row: Row = {
    scenario,
    requestsPerSecond: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    ratioToBare: bare ? Math.round((result.requests.average / bare) * 100) / 100 : null,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    clientCores,
    serverMicrosPerCall,
    note,
  }
  console.log(`  ${scenario}: ${row.requestsPerSecond} req/s, p50 ${row.p50} ms, p99 ${row.p99} ms, ratio ${row.ratioToBare ?? '-'}, non-2xx ${row.non2xx}, client ${clientCores} cores${serverMicrosPerCall === undefined ? '' : `, server ${serverMicrosPerCall} µs CPU/call`}${note ? `, ${note}` : ''}`)
  return row
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}
