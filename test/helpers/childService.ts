/** A real keygate process started by a test: its output gathered, killed at the test's end if still running. */
import type { ChildProcess } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import type { Test } from 'tap'

export interface WatchedChild {
  /** Everything the process wrote to stdout and stderr so far. */
  readonly output: { text: string }
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Resolves once the output holds `text` (e.g. 'keygate listening'); throws if the process ends or 60 s pass first. */
  waitFor(text: string): Promise<void>
}

export function watchChild(t: Test, child: ChildProcess): WatchedChild {
  const output = { text: '' }
  child.stdout?.on('data', (chunk) => (output.text += chunk))
  child.stderr?.on('data', (chunk) => (output.text += chunk))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => child.once('exit', (code, signal) => done({ code, signal })))
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  return {
    output,
    exited,
    async waitFor(text) {
      const since = Date.now()
      while (!output.text.includes(text)) {
        if (child.exitCode !== null || Date.now() - since > 60_000) throw new Error(`the process did not say '${text}':\n${output.text}`)
        await new Promise((done) => setTimeout(done, 50))
      }
    },
  }
}

/**
 * The worker processes of a `WORKERS` service started from the sources: the primary's
 * children that run kernel/boot/main.ts (tsx's esbuild is a child too). Linux only (/proc).
 */
export function workerPids(primaryPid: number): number[] {
  return readdirSync('/proc').filter((name) => /^\d+$/.test(name)).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[1] === String(primaryPid) &&
        readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('kernel/boot/main.ts')
    } catch {
      return false // gone meanwhile
    }
  }).map(Number)
}
