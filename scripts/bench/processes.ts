/** The processes a benchmark loads: a bare node:http ceiling and the service itself. */
import { spawn, type ChildProcess } from 'node:child_process'
import { createWriteStream, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { freePort } from '../../test/helpers/freePort.ts'
import { benchRoot, databaseUrl } from './settings.ts'
import { missingMallocSettings } from '../../kernel/boot/mallocSettings.ts'

export interface ServiceProcess {
  base: string
  port: number
  child: ChildProcess
}

function waitForLine(child: ChildProcess, pattern: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = ''
    const onData = (chunk: Buffer) => {
      seen += chunk
      if (pattern.test(seen)) {
        child.stdout!.off('data', onData)
        resolve()
      }
    }
    child.stdout!.on('data', onData)
    child.once('exit', (code) => reject(new Error(`process exited (${code}) before it was ready:\n${seen}`)))
  })
}

const bareServerSource = `
const http = require('node:http')
const body = Buffer.from(process.env.BARE_BODY, 'base64').toString('latin1')
http.createServer((request, response) => {
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length })
  response.end(body, 'latin1')
}).listen(Number(process.env.PORT), '127.0.0.1', () => console.log('ready'))
`

/**
 * The ceiling: node:http answering every request with `body`, the very bytes the service
 * answers the measured call with, so a ratio is what keygate's stages cost and not the
 * difference between sending a 40-byte and a 4 KB answer.
 */
export async function startBare(body: Buffer): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort()
  const child = spawn(process.execPath, ['-e', bareServerSource], { env: { ...process.env, PORT: String(port), BARE_BODY: body.toString('base64') }, stdio: ['ignore', 'pipe', 'inherit'] })
  await waitForLine(child, /ready/)
  return { url: `http://127.0.0.1:${port}/`, child }
}

/**
 * What `npm start` runs: the compiled dist/ (`npm run bench` builds it first), so the
 * figures are production's, without tsx's loader in memory. BENCH_SERVICE_FROM=sources
 * runs the TypeScript sources under tsx instead.
 */
const serviceEntry = process.env.BENCH_SERVICE_FROM === 'sources'
  ? ['--import', 'tsx', join(benchRoot, 'kernel/boot/main.ts')]
  : [join(benchRoot, 'dist/kernel/boot/main.js')]

/**
 * The service on `dataDir` (MySQL when DATABASE_URL is set). `nodeArguments` are node
 * flags for this process alone; BENCH_SERVICE_NODE_OPTIONS and BENCH_SERVICE_NODE_ARGS
 * (flags NODE_OPTIONS refuses, e.g. `--cpu-prof`) apply to every service process.
 */
export async function startService(dataDir: string, extraEnv: Record<string, string> = {}, nodeArguments: string[] = []): Promise<ServiceProcess> {
  const port = await freePort()
  // glibc's settings as `npm start` gives them (kernel/boot/mallocSettings.ts), unless this run's environment has its own.
  const env: Record<string, string> = { ...missingMallocSettings(process.env), ...(process.env as Record<string, string>), PORT: String(port), DATA_DIR: dataDir, BODY_LIMIT: String(16 * 1024 * 1024), ...extraEnv }
  if (databaseUrl) env.DATABASE_URL = databaseUrl
  if (process.env.BENCH_SERVICE_NODE_OPTIONS) env.NODE_OPTIONS = process.env.BENCH_SERVICE_NODE_OPTIONS
  const flags = [...(process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean), ...nodeArguments]
  const child = spawn(process.execPath, [...flags, ...serviceEntry], { env, stdio: ['ignore', 'pipe', 'inherit'], cwd: benchRoot })
  await waitForLine(child, /listening on/)
  // Once ready, its output is drained (a full pipe would stall the service) or kept in
  // BENCH_SERVICE_LOG (e.g. with BENCH_SERVICE_NODE_ARGS=--trace-gc).
  if (process.env.BENCH_SERVICE_LOG) child.stdout!.pipe(createWriteStream(process.env.BENCH_SERVICE_LOG, { flags: 'a' }))
  else child.stdout!.resume()
  return { base: `http://127.0.0.1:${port}/v1.0`, child, port }
}

/** Stops a process and waits for it to be gone (a --cpu-prof profile is written on exit). */
export function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })
}

export function rssMegabytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024
}

/** CPU seconds (user + system) a process and its waited-for children have used so far. */
export function cpuSeconds(pid: number): number {
  // After the command name (which may hold spaces): utime, stime, cutime, cstime are fields 14-17, in clock ticks (100 a second on Linux).
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])
  return ticks / 100
}
