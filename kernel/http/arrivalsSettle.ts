/**
 * How long a stopping server keeps taking up what clients had already sent before it
 * closes its listener (kernel/http/server.ts close()).
 *
 * Node takes up one waiting connection per event-loop turn (libuv accepts one per
 * iteration), so a fixed number of turns takes up only that many connections of a listen
 * backlog (20 turns reset the 21st call sent before SIGTERM). A turn that brings nothing
 * new, though, says the backlog is empty: one process turns until two turns in a row
 * bring nothing, which under steady load comes soon (a turn is short when nothing
 * waits), so clients connecting after the signal are not taken up for long.
 *
 * A cluster worker is handed its connections by the primary one at a time over IPC,
 * each after the worker acknowledged the one before: a quiet turn there says nothing
 * about what the primary still holds, so a worker waits until nothing new has come for
 * `clusterQuietMs`. Either way at most `limitMs` in all.
 */
export const clusterQuietMs = 25
export const arrivalsLimitMs = 2000
/** How long a connection taken up but silent so far may still send its request once the listener has closed. */
export const freshGraceMs = 100

/** Resolves once `arrivals()` stayed the same for two turns and `quietMs`, or after `limitMs`. */
export async function arrivalsSettle(arrivals: () => number, quietMs: number, limitMs = arrivalsLimitMs): Promise<void> {
  const started = Date.now()
  let seen = arrivals()
  let lastNew = started
  let quietTurns = 0
  while ((quietTurns < 2 || Date.now() - lastNew < quietMs) && Date.now() - started < limitMs) {
    // Turn at once while something comes (one connection a turn) and for the first quiet
    // turns; a longer quiet period waits a little instead of spinning the CPU through it.
    const quiet = quietTurns >= 2
    await new Promise<void>((resolve) => (quiet ? setTimeout(resolve, 2) : setImmediate(resolve)))
    if (arrivals() !== seen) {
      seen = arrivals()
      lastNew = Date.now()
      quietTurns = 0
    } else quietTurns++
  }
}
