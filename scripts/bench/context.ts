import type { ChildProcess } from 'node:child_process'
import type { SigningKey } from '../../kernel/auth/signature.ts'
import type { GoalReport } from './goals.ts'
import type { Row } from './load.ts'
import type { ServiceProcess } from './processes.ts'

/** What scripts/bench.ts has set up once and hands to every scenario module. */
export interface BenchContext {
  dataDir: string
  service: ServiceProcess
  bare: { url: string; child: ChildProcess }
  /** The bare server's throughput in the first ceiling run: the denominator of single-run ratios. */
  bareRate: number
  admin: SigningKey
  /** A rate-limited key at LogLevel 0 holding every group the admin may assign. */
  reader: SigningKey
  groupIds: number[]
  /** The current day code (D5), for calls that need one. */
  today: () => string
  rows: Row[]
  goals: GoalReport
  /** Processes a scenario starts: stopped at the end whatever happens. */
  children: ChildProcess[]
}
