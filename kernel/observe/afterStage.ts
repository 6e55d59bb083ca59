import type { Exchange } from '../http/exchange.ts'

/**
 * The shape of a pipeline stage with an `after` phase (coming to kernel/http/pipeline.ts):
 * `after` runs once the call has its answer (`exchange.answer`), also on errors. The
 * observers here only have an `after`. Until the pipeline runs after-phases itself,
 * kernel/boot/kernel.ts calls `runAfter` where the call is logged.
 */
export interface AfterStage {
  name: string
  run?(exchange: Exchange): void | Promise<void>
  after?(exchange: Exchange): void | Promise<void>
}

/** Runs the after-phases in reverse order; an observer's failure never touches the call. */
export function runAfter(stages: readonly AfterStage[], exchange: Exchange, report: (error: unknown) => void): void {
  for (let index = stages.length - 1; index >= 0; index--) {
    try {
      const pending = stages[index].after?.(exchange)
      if (pending) pending.catch(report)
    } catch (error) {
      report(error)
    }
  }
}
