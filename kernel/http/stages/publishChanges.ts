import type { Stage } from '../pipeline.ts'

/**
 * With Redis (D16), or with cluster workers (`WORKERS`): a call that changed something
 * answers only once the other processes applied its cache invalidations, so the next
 * call on any of them sees the change. Handlers (and plugins calling `kernel.cache.invalidate`) need not
 * await anything: this stage, just outside the handler, waits for what is in flight.
 * Costs nothing when nothing is pending (no promise returned).
 */
export function publishChangesStage(inFlight: () => Promise<void> | undefined): Stage {
  return {
    name: 'publishChanges',
    after: () => inFlight(),
  }
}
