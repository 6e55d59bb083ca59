/**
 * Where a service's CPU time went, from a V8 `.cpuprofile` (`node --cpu-prof`):
 * `tsx scripts/bench/profileSummary.ts prof/CPU.*.cpuprofile [calls]`.
 *
 * Each sample is charged to the kernel concern it ran for: the nearest frame on its
 * stack in `kernel/` or `plugins/` (a stage, the call log, auth...), so the HMAC that
 * `verify` asks node:crypto for counts as `verify`; samples with no kernel frame on the
 * stack go to what they are (node:http, GC, database driver, idle). Also lists the
 * functions with the most self time. Given the number of calls served, prints µs per call.
 */
import { readFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'

interface CallFrame { functionName: string; url: string; lineNumber: number }
interface ProfileNode { id: number; callFrame: CallFrame; children?: number[] }
interface CpuProfile { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number }

export interface ProfileSummary {
  /** Microseconds of CPU (not idle) in the profile. */
  busyMicros: number
  totalMicros: number
  /** Microseconds by concern, largest first. */
  byConcern: [string, number][]
  /** Microseconds of self time by function, largest first. */
  bySelf: [string, number][]
}

/** A kernel or plugin source file as a concern: `kernel/http/stages/verify.ts` -> `stage verify`. */
function ownConcern(url: string): string | null {
  const at = url.search(/\/(kernel|plugins)\//)
  if (at === -1 || url.includes('/node_modules/')) return null
  const path = url.slice(at + 1).replace(/\.[tj]s$/, '')
  const stage = /^kernel\/http\/stages\/(.+)$/.exec(path)
  if (stage) return `stage ${stage[1]}`
  return path
}

/** What a frame outside the kernel is, for samples with no kernel frame above them. */
function foreignConcern(frame: CallFrame): string {
  const { url, functionName } = frame
  if (functionName === '(idle)') return '(idle)'
  if (functionName === '(garbage collector)') return 'GC'
  if (functionName === '(program)') return 'V8/native (program)'
  // The socket write syscall; its samples also hold the time the process waited for a core.
  if (url === '' && /^write(v|Utf8String|Latin1String|Buffer)$/.test(functionName)) return 'socket write (syscall)'
  const module = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)
  if (module) return `module ${module[1]}`
  if (/node:internal\/(http|_http)|node:_http|node:http/.test(url) || /^_http/.test(url)) return 'node:http'
  if (/node:(internal\/)?(net|stream|streams|tcp|dns)/.test(url)) return 'node:net/stream'
  if (/node:(internal\/)?crypto/.test(url)) return 'node:crypto'
  if (/node:internal\/(timers|process\/task_queues|async_hooks)|node:timers/.test(url)) return 'node:timers/microtasks'
  if (url.startsWith('node:')) return `node:${url.replace(/^node:(internal\/)?/, '').split('/')[0]}`
  return url === '' ? `native ${functionName || '(anonymous)'}` : url
}

/**
 * `window`: only samples taken between these monotonic times (µs, the clock of
 * `process.hrtime`, which V8's profile timestamps share on Linux), e.g. the load alone
 * without the process's start.
 */
export function summariseProfile(profile: CpuProfile, window?: { fromMicros: number; toMicros: number }): ProfileSummary {
  const byId = new Map<number, ProfileNode>()
  const parentOf = new Map<number, number>()
  for (const node of profile.nodes) {
    byId.set(node.id, node)
    for (const child of node.children ?? []) parentOf.set(child, node.id)
  }
  // The concern of each node, found once by walking up to the nearest kernel frame.
  const concernOf = new Map<number, string>()
  const concern = (id: number): string => {
    const known = concernOf.get(id)
    if (known !== undefined) return known
    const leaf = byId.get(id)!.callFrame
    let found: string | null = leaf.url === '' && /^write(v|Utf8String|Latin1String|Buffer)$/.test(leaf.functionName) ? foreignConcern(leaf) : null
    for (let at: number | undefined = id; at !== undefined && found === null; at = parentOf.get(at)) found = ownConcern(byId.get(at)!.callFrame.url)
    const result = found ?? foreignConcern(byId.get(id)!.callFrame)
    concernOf.set(id, result)
    return result
  }
  const concerns = new Map<string, number>()
  const selves = new Map<string, number>()
  let idle = 0
  let total = 0
  let at = profile.startTime
  for (let index = 0; index < profile.samples.length; index++) {
    const id = profile.samples[index]
    at += profile.timeDeltas[index]
    if (window && (at < window.fromMicros || at > window.toMicros)) continue
    // A sample's time is the delta to the next one.
    const micros = profile.timeDeltas[index + 1] ?? 0
    total += micros
    const frame = byId.get(id)!.callFrame
    if (frame.functionName === '(idle)') {
      idle += micros
      continue
    }
    const name = concern(id)
    concerns.set(name, (concerns.get(name) ?? 0) + micros)
    const file = frame.url.replace(/^.*\/(kernel|plugins|node_modules)\//, '$1/')
    const self = `${frame.functionName || '(anonymous)'} ${file}${frame.url ? `:${frame.lineNumber + 1}` : ''}`
    selves.set(self, (selves.get(self) ?? 0) + micros)
  }
  const sorted = (map: Map<string, number>) => [...map].sort((a, b) => b[1] - a[1])
  return { busyMicros: total - idle, totalMicros: total, byConcern: sorted(concerns), bySelf: sorted(selves) }
}

export function readProfile(file: string, window?: { fromMicros: number; toMicros: number }): ProfileSummary {
  return summariseProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, window)
}

/** The summary as text: concerns, then the top self-time functions; per call when `calls` is known. */
export function formatProfile(summary: ProfileSummary, calls?: number, top = 15): string {
  const perCall = (micros: number) => (calls ? ` ${(micros / calls).toFixed(1).padStart(7)} µs/call` : '')
  const share = (micros: number) => `${((micros / summary.busyMicros) * 100).toFixed(1).padStart(5)} %`
  const lines = [`busy ${(summary.busyMicros / 1e6).toFixed(2)} s of ${(summary.totalMicros / 1e6).toFixed(2)} s${calls ? `, ${calls} calls: ${(summary.busyMicros / calls).toFixed(1)} µs CPU per call` : ''}`, '', 'by concern (each sample charged to the nearest kernel/plugin frame on its stack):']
  for (const [name, micros] of summary.byConcern.slice(0, top)) lines.push(`  ${share(micros)}${perCall(micros)}  ${name}`)
  lines.push('', 'top self time by function:')
  for (const [name, micros] of summary.bySelf.slice(0, top)) lines.push(`  ${share(micros)}${perCall(micros)}  ${name}`)
  return lines.join('\n')
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [file, calls, top] = process.argv.slice(2)
  if (!file) {
    console.error('usage: tsx scripts/bench/profileSummary.ts <file.cpuprofile> [calls] [top]')
    process.exit(2)
  }
  console.log(formatProfile(readProfile(file), calls ? Number(calls) : undefined, top ? Number(top) : undefined))
}
