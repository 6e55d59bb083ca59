/**
 * How long a stopping server keeps taking up what clients had already sent before it
 * closes its listener (kernel/http/server.ts close()).
 *
 * Node takes up one waiting connection per event-loop turn (libuv accepts one per
 * iteration), and with WORKERS the primary hands connections to a worker one at a
 * time over IPC, each waiting for the worker's acknowledgement. So a fixed number of
 * turns takes up only that many connections of a listen backlog (20 turns left the
 * 21st call sent before SIGTERM to be reset), and one quiet turn in a worker says
 * nothing about what the primary still holds for it. Instead the server turns until
 * nothing new has arrived for `quietMs`, and at most `limitMs` in all: clients that
 * keep opening connections after the signal do not hold the stop for ever.
 */
export const arrivalsQuietMs = 100
export const arrivalsLimitMs = 2000

/** Resolves once `arrivals()` has not grown for `quietMs`, or after `limitMs`. */
export async function arrivalsSettle(arrivals: () => number, quietMs = arrivalsQuietMs, limitMs = arrivalsLimitMs): Promise<void> {
  const started = Date.now()
  let seen = arrivals()
  let lastNew = started
  while (Date.now() - lastNew < quietMs && Date.now() - started < limitMs) {
    // A turn that brought something: the next one at once (one connection a turn); a quiet
    // one: wait a little instead of spinning the CPU through the quiet period.
    const busy = arrivals() !== seen
    if (busy) {
      seen = arrivals()
      lastNew = Date.now()
    }
    await new Promise<void>((resolve) => (busy || Date.now() - lastNew < 2 ? setImmediate(resolve) : setTimeout(resolve, 2)))
  }
}
