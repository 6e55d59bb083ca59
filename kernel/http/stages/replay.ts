import type { Stage } from '../pipeline.ts'
import type { ReplayGuard } from '../../auth/replayGuard.ts'
import { refused, unauthorized } from '../errors.ts'

/**
 * A captured state-changing request cannot be sent again within its clock window: the
 * second use of a signature on a write route is 401. Reads stay replayable (they change
 * nothing). A client that retries a write signs it anew, or sends an Idempotency-Key.
 */
export function replayStage(guard: ReplayGuard): Stage {
  return {
    name: 'replay',
    run(exchange) {
      if (!exchange.mounted.writes || exchange.caller.anonymous) return
      return guard.firstUse(exchange.caller, exchange.credentials!.apiHmac!).then((first) => {
        if (!first) throw refused(unauthorized('This request was already used (replay).'), 'replay')
      })
    },
  }
}
