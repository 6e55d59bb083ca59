import type { Answer, Exchange } from './exchange.ts'

/**
 * A named pipeline stage. `run` works before the handler, in order, and may finish the
 * call early by setting `exchange.answer` (or by throwing an ApiError). `after` works
 * once the call has its answer, in reverse order, for every stage whose `run` was
 * reached (also when a later one failed): storing a cached answer, rate headers, the
 * call's log record.
 */
export interface Stage {
  name: string
  run?(exchange: Exchange): void | Promise<void>
  after?(exchange: Exchange): void | Promise<void>
}

/** Turns whatever a stage threw into the answer the client gets (the kernel's error policy). */
export type FailureAnswer = (error: unknown, exchange: Exchange) => Answer

/** A fixed sequence of stages, made once at start; `run` leaves the answer on the exchange. */
export interface Pipeline {
  readonly stages: readonly Stage[]
  run(exchange: Exchange): Promise<void>
}

export function createPipeline(stages: readonly Stage[], failure: FailureAnswer): Pipeline {
  const befores = stages.map((stage) => stage.run?.bind(stage))
  const afters = stages.map((stage) => stage.after?.bind(stage))

  // Stages that answer from memory return undefined, so a call costs no extra microtask
  // per stage; only a returned promise is awaited.
  async function run(exchange: Exchange): Promise<void> {
    let reached = 0
    try {
      for (; reached < befores.length; reached++) {
        const before = befores[reached]
        if (before === undefined) continue
        const pending = before(exchange)
        if (pending !== undefined) await pending
        if (exchange.answer !== null) break
      }
    } catch (error) {
      exchange.answer = failure(error, exchange)
    }
    if (reached >= afters.length) reached = afters.length - 1
    for (let index = reached; index >= 0; index--) {
      const after = afters[index]
      if (after === undefined) continue
      try {
        const pending = after(exchange)
        if (pending !== undefined) await pending
      } catch (error) {
        exchange.answer = failure(error, exchange)
      }
    }
  }

  return { stages, run }
}
