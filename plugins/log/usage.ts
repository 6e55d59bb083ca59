import { defineRoute, httpDate, notFound, pagedListHeaders, parseMaxHits, type CallerKey, type DefaultGroup, type KernelServices, type UsageScope } from '../../kernel/sdk.ts'
import { fullLimitsAnswer, noCredits, windowRows } from './limits.ts'
import { usageAnswerSchema } from './schemas.ts'

/**
 * POST /Api/Read/Usage (issue 18, the console's Usage page): the calls of one key (the
 * caller itself or a key it created) or of the caller's whole tenant, per hour over the
 * last 24 hours or per day over the last 30 days, and per status; beside them the
 * rate-limit windows, the tenant's quota windows and the credits as they stand now,
 * for gauges. The sums come from the kernel's call log (`kernel.callLog.usage`).
 */
export const usagePath = '/Api/Read/Usage'

const hourMs = 3_600_000
const dayMs = 86_400_000
const ranges = {
  '24h': { step: '1Hour', stepMs: hourMs, buckets: 24 },
  '30d': { step: '1Day', stepMs: dayMs, buckets: 30 },
} as const
type Range = keyof typeof ranges

interface UsageRequest { KeyId?: number; Range?: Range }

const usageSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    KeyId: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
    Range: { enum: Object.keys(ranges) },
  },
}

/** One text for "no such key" and "a key you did not create": nobody learns which (D6). */
const noSuchKey = 'Error: No key with that KeyId among your own key and the keys you created.'

interface UsageAnswer {
  KeyId: number | null
  Range: Range
  Step: string
  From: string
  To: string
  Total: number
  /** One row per bucket and status that had calls, oldest first; Time is the bucket's start. */
  Calls: { Time: string; Status: number; Count: number }[]
  /** The key's rate-limit windows, the tenant's quota windows (`Tenant 1Mon`) and its credits, now. */
  Windows: Record<string, unknown>[]
}

/** A group of its own, so installations made before this route get it for the root key only. */
export const usageGroup: DefaultGroup = {
  name: 'Usage reader',
  paths: [{ path: usagePath, displayName: 'Read the calls per hour or day and status of your keys or tenant, and your limits now' }],
}

/** The key whose windows are shown: the caller, or a key it created (with that key's MaxHits). */
async function subjectKey(kernel: KernelServices, caller: CallerKey, keyId: number | undefined): Promise<CallerKey> {
  if (keyId === undefined || keyId === caller.id) return caller
  const record = await kernel.keys.find(keyId)
  if (!record || Number(record.created_by) !== caller.id) throw notFound(noSuchKey)
  return { ...caller, id: Number(record.id), rateWindows: parseMaxHits(record.max_hits), metered: record.credits !== null }
}

async function readUsage(kernel: KernelServices, caller: CallerKey, body: UsageRequest): Promise<UsageAnswer> {
  if (caller.anonymous) throw notFound(noSuchKey)
  const range = body.Range ?? '24h'
  const { step, stepMs, buckets } = ranges[range]
  const key = await subjectKey(kernel, caller, body.KeyId)
  const now = kernel.clock()
  // Whole buckets: the current one and the ones before it.
  const from = now - (now % stepMs) - (buckets - 1) * stepMs
  const scope: UsageScope = body.KeyId === undefined ? { parent: caller.parent, custno: caller.custno } : { keyId: key.id }
  const counts = await kernel.callLog.usage(scope, { from, to: now, stepMs })
  const windows = await kernel.rateLimits.status(key)
  const tenants = await kernel.rateLimits.tenantStatus(caller)
  const credits = key.metered ? await kernel.credits.status(key.id) : noCredits
  // TimeLeft from the moment the windows were read, not from before the usage query:
  // an unopened 1Min window said "61 Seconds".
  const windowsAt = kernel.clock()
  return {
    KeyId: body.KeyId ?? null,
    Range: range,
    Step: step,
    From: httpDate(from),
    To: httpDate(now),
    Total: counts.reduce((sum, count) => sum + count.calls, 0),
    Calls: counts.map((count) => ({ Time: httpDate(count.bucket), Status: count.status, Count: count.calls })),
    Windows: windowRows(fullLimitsAnswer(key, windows, tenants, credits, windowsAt)),
  }
}

export function usageRoute(kernel: KernelServices) {
  return defineRoute<UsageRequest>({
    method: 'POST',
    path: usagePath,
    body: usageSchema,
    answer: usageAnswerSchema,
    xml: { root: 'Usage', item: 'Call', list: 'Calls' },
    // CSV: one row per bucket and status; the totals go to headers as for other paged lists (D12).
    answerHeaders: pagedListHeaders({ csvOnly: true, page: false }),
    csv: (result: UsageAnswer, call) => {
      call.setHeader('X-Total-Count', String(result.Total))
      return result.Calls
    },
    csvColumns: ['Time', 'Status', 'Count'],
    // Not cached: the point is to see the calls just made.
    handler: (call) => readUsage(kernel, call.caller, call.body),
  })
}
