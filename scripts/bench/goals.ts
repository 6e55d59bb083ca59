/**
 * The issue-19 goals as `npm run bench` reports them: one line per goal and database,
 * `goal 1 acl sqlite: 0.93x bare (target >= 0.9), ... MET`. Every scenario module
 * reports through `GoalReport.add`, so all goals print (and land in the JSON and the
 * summary) the same way.
 */
import { databaseName } from './settings.ts'

export type GoalStatus = 'MET' | 'NOT MET' | 'MEASURED'

export interface GoalLine {
  /** The goal number (1-7). */
  goal: number
  /** Short name of what was measured: `acl`, `log2`, `people first page`, `import`. */
  name: string
  database: 'sqlite' | 'mariadb'
  /** The figures and their targets, e.g. `0.93x bare (target >= 0.9)`. */
  measured: string
  /** MET/NOT MET for a goal with a target; MEASURED for one without (goal 6). */
  status: GoalStatus
}

export function formatGoal(line: GoalLine): string {
  return `goal ${line.goal} ${line.name} ${line.database}: ${line.measured} ${line.status}`
}

/** Rounds for display: two decimals for ratios, one for milliseconds. */
export const ratio = (value: number) => `${value.toFixed(2)}x`
export const ms = (value: number) => `${Number(value.toFixed(1))} ms`

export class GoalReport {
  readonly lines: GoalLine[] = []

  /** Records and prints a goal's line; `met` null for a goal without a target. */
  add(goal: number, name: string, measured: string, met: boolean | null): GoalLine {
    const line: GoalLine = { goal, name, database: databaseName, measured, status: met === null ? 'MEASURED' : met ? 'MET' : 'NOT MET' }
    this.lines.push(line)
    console.log(formatGoal(line))
    return line
  }

  /** Every goal line again, in goal order, after the scenarios' own output. */
  print(): void {
    console.log('\ngoals')
    for (const line of [...this.lines].sort((a, b) => a.goal - b.goal)) console.log(formatGoal(line))
  }
}
