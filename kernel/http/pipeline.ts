import type { Exchange } from './exchange.ts'

/** A named pipeline stage. It may finish the exchange early by setting `exchange.answer`. */
export interface Stage {
  name: string
  run(exchange: Exchange): void | Promise<void>
}

/**
 * Runs stages in order, awaiting only those that return a promise, so a call whose
 * stages all answer from memory costs no extra microtask per stage.
 */
export async function runPipeline(stages: readonly Stage[], exchange: Exchange): Promise<void> {
  for (let index = 0; index < stages.length; index++) {
    const pending = stages[index].run(exchange)
    if (pending !== undefined) await pending
    if (exchange.answer !== null) return
  }
}
