/** Runs the operator CLI (scripts/admin.ts) as the operator does: a child process on an environment. */
import { spawn } from 'node:child_process'
import { openSync, closeSync } from 'node:fs'
import type { Service } from './service.ts'

export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
}

/** `env` replaces DATA_DIR/DATABASE_URL/...; `stdinFile` is fed as stdin, `stdoutFile` receives stdout. */
export function runAdmin(args: string[], env: Record<string, string | undefined>, files: { stdinFile?: string; stdoutFile?: string } = {}): Promise<CliResult> {
  const childEnv: Record<string, string | undefined> = { ...process.env, DATABASE_URL: undefined, MASTER_KEY: undefined, PORT: undefined, CONFIG_FILE: undefined, ...env }
  for (const name of Object.keys(childEnv)) if (childEnv[name] === undefined) delete childEnv[name]
  const stdin = files.stdinFile ? openSync(files.stdinFile, 'r') : 'ignore'
  const stdout = files.stdoutFile ? openSync(files.stdoutFile, 'w') : 'pipe'
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/admin.ts', ...args], { env: childEnv as NodeJS.ProcessEnv, stdio: [stdin, stdout, 'pipe'] })
    let out = ''
    let err = ''
    child.stdout?.on('data', (chunk) => (out += chunk))
    child.stderr!.on('data', (chunk) => (err += chunk))
    child.on('error', reject)
    child.on('close', (code) => {
      if (typeof stdin === 'number') closeSync(stdin)
      if (typeof stdout === 'number') closeSync(stdout)
      resolve({ code, stdout: out, stderr: err })
    })
  })
}

/**
 * The CLI on a running test service's own data folder and database, with the default
 * plugins whatever the shell's PLUGINS says: an operator's command beside the service.
 */
export function adminOn(service: Service, ...words: string[]): Promise<CliResult> {
  return runAdmin(words, { DATA_DIR: service.config.dataDir, DATABASE_URL: service.config.databaseUrl ?? undefined, PLUGINS: undefined })
}
