/**
 * Goal 7: where the CPU time of a hot-path call goes. A service process of its own,
 * started with `--cpu-prof`, takes the goal-1 load at LogLevel 0, then another at
 * LogLevel 2; each profile is cut to the load's own seconds and summarised by kernel
 * concern (profileSummary.ts). Kept under BENCH_PROFILE_DIR (default bench-results/prof).
 */
import { mkdirSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import type { BenchContext } from './context.ts'
import { measure } from './load.ts'
import { startService, stop } from './processes.ts'
import { formatProfile, readProfile } from './profileSummary.ts'
import { benchRoot } from './settings.ts'

const path = '/Api/Read/Acl'
const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n)

export async function profileGoal(context: BenchContext): Promise<void> {
  const directory = join(process.env.BENCH_PROFILE_DIR ?? join(benchRoot, 'bench-results', 'prof'), `${Date.now()}`)
  for (const level of [0, 2]) {
    const levelDirectory = join(directory, `level${level}`)
    mkdirSync(levelDirectory, { recursive: true })
    const service = await startService(context.dataDir, {}, ['--cpu-prof', `--cpu-prof-dir=${levelDirectory}`])
    context.children.push(service.child)
    const fromMicros = monotonicMicros()
    const { result, serverMicrosPerCall } = await measure(service.base + path, { method: 'GET', path, key: context.reader, headers: { 'x-loglevel': String(level) } }, { serverPid: service.child.pid })
    const toMicros = monotonicMicros()
    await stop(service.child)
    const file = readdirSync(levelDirectory).find((name) => name.endsWith('.cpuprofile'))
    if (!file) throw new Error(`no profile written in ${levelDirectory}`)
    const summary = readProfile(join(levelDirectory, file), { fromMicros, toMicros })
    const calls = result.requests.total
    console.log(`\n  profile at log level ${level} (${join(levelDirectory, file)}):\n${formatProfile(summary, calls).replace(/^/gm, '    ')}\n`)
    const top = summary.byConcern.filter(([name]) => name !== 'GC').slice(0, 4).map(([name, micros]) => `${name} ${(micros / calls).toFixed(1)}`).join(', ')
    const gc = summary.byConcern.find(([name]) => name === 'GC')?.[1] ?? 0
    context.goals.add(7, `profile level ${level}`, `${serverMicrosPerCall} µs service CPU per call (${Math.round(result.requests.average)} req/s; profiled ${(summary.busyMicros / calls).toFixed(1)} µs wall, descheduled time included); profiled µs per call: ${top}, GC ${(gc / calls).toFixed(1)}`, null)
  }
}
