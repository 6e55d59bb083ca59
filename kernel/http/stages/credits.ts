import type { Stage } from '../pipeline.ts'
import { ApiError, refused } from '../errors.ts'
import { httpDate } from '../../auth/apiDate.ts'
import type { CreditLedger } from '../../limits/credits.ts'

/**
 * Issue 16: a key with Credits spends its route's cost (default 1) per call, in the
 * database; at too few left the call is refused with 429 and spends nothing. Keys
 * without Credits (and routes of cost 0) do nothing here.
 */
export function creditsStage(ledger: CreditLedger, clock: () => number): Stage {
  return {
    name: 'credits',
    run(exchange) {
      if (!exchange.caller.metered) return
      const cost = exchange.mounted.route.cost ?? 1
      if (cost <= 0) return
      return ledger.spend(exchange.caller.id, cost).then((spending) => {
        if (spending.spent) return
        if (spending.refillAt === null) throw refused(new ApiError('TOO_MANY_REQUESTS', 'No credits left'), 'credits')
        const headers = { 'Retry-After': String(Math.max(1, Math.ceil((spending.refillAt - clock()) / 1000))) }
        throw refused(new ApiError('TOO_MANY_REQUESTS', `No credits left (refill ${httpDate(spending.refillAt)})`, headers), 'credits')
      })
    },
  }
}
