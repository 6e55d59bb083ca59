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

/** Whether a figure meets its target, e.g. `(value) => value >= 0.85`. */
export type Target = (value: number) => boolean

/**
 * `value` rounded to `decimals`, or to as many more (up to 6) as it takes for the
 * printed figure to meet `target` exactly when the value does: 0.8496 against `>= 0.85`
 * prints `0.8496`, never `0.85` beside NOT MET.
 */
export function figure(value: number, decimals: number, target?: Target): string {
  let text = value.toFixed(decimals)
  for (let more = decimals + 1; target && more <= 6 && target(Number(text)) !== target(value); more++) text = value.toFixed(more)
  return text
}

/** A ratio for display: two decimals, more where its target needs them. */
export const ratio = (value: number, target?: Target) => `${figure(value, 2, target)}x`
/** Milliseconds for display: one decimal at most, more where its target needs them. */
export const ms = (value: number, target?: Target) => `${Number(figure(value, 1, target))} ms`

/** Said on a goal's line when the run had fewer people or keys than the goal names: it does not meet it. */
export const shortOf = (count: number, goal: number, what: string) => (count < goal ? ` (only ${count} ${what}: the goal is ${goal})` : '')

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
