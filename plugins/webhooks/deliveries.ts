import { badRequest, httpDate, parseInputDate, parseInputDateUntil, type Call, type Kysely } from '../../kernel/sdk.ts'
import type { WebhookTables } from './tables.ts'
import { defaultPageSize, type ReadDeliveriesBody } from './schemas.ts'
import { scopeOf } from './authority.ts'

function dateFilter(name: string, text: string | undefined, parse: (text: string) => number | null): number | undefined {
  if (text === undefined) return undefined
  const time = parse(text)
  if (time === null) throw badRequest(`${name} must be a date (HTTP-date, RFC 3339 or YYYY-MM-DD).`)
  return time
}

/** The CSV header of a delivery row. */
export const deliveryColumns = ['Id', 'WebhookId', 'Event', 'Status', 'Attempts', 'LastStatus', 'LastError', 'NextAttempt', 'Created', 'Delivered'] as const

/**
 * POST /Api/Read/Deliveries (issue 17; who may is the route's permit): the deliveries of the caller's webhooks, newest
 * first, with filters and pages. A delivery's Id is the `webhook-id` its receiver saw.
 */
/** A filter given as `From` or as `from` (the spelling of the other paged reads), never both. */
function eitherSpelling<T>(body: ReadDeliveriesBody, upper: keyof ReadDeliveriesBody, lower: keyof ReadDeliveriesBody): T | undefined {
  if (body[upper] !== undefined && body[lower] !== undefined) throw badRequest(`Give ${upper} or ${lower}, not both.`)
  return (body[upper] ?? body[lower]) as T | undefined
}

export async function readDeliveries(db: Kysely<WebhookTables>, call: Call<ReadDeliveriesBody>) {
  const body = call.body ?? {}
  const from = dateFilter('From', eitherSpelling<string>(body, 'From', 'from'), parseInputDate)
  // Inclusive: To = a delivery's Created (whole seconds) finds it, and a date alone takes in its whole day.
  const to = dateFilter('To', eitherSpelling<string>(body, 'To', 'to'), parseInputDateUntil)
  if (from !== undefined && to !== undefined && from > to) throw badRequest('From must not be later than To.')
  const scope = scopeOf(call.caller)
  const page = eitherSpelling<number>(body, 'Page', 'page') ?? 1
  const size = eitherSpelling<number>(body, 'PageSize', 'size') ?? defaultPageSize
  const selected = db.selectFrom('webhook_deliveries as d')
    .innerJoin('webhooks as w', 'w.id', 'd.webhook_id')
    .where('w.parent', '=', scope.parent)
    .$if(scope.custno !== null, (query) => query.where('w.custno', '=', scope.custno!))
    .$if(body.WebhookId !== undefined, (query) => query.where('d.webhook_id', '=', body.WebhookId!))
    .$if(body.Event !== undefined, (query) => query.where('d.type', '=', body.Event!))
    .$if(body.Status !== undefined, (query) => query.where('d.status', '=', body.Status!))
    .$if(from !== undefined, (query) => query.where('d.created', '>=', from!))
    .$if(to !== undefined, (query) => query.where('d.created', '<=', to!))
  const [{ total }, rows] = await Promise.all([
    selected.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow(),
    selected.selectAll('d').orderBy('d.created', 'desc').orderBy('d.id').limit(size).offset((page - 1) * size).execute(),
  ])
  return {
    Total: Number(total),
    Page: page,
    Deliveries: rows.map((row) => ({
      Id: row.id,
      WebhookId: Number(row.webhook_id),
      Event: row.type,
      Status: row.status,
      Attempts: Number(row.attempts),
      LastStatus: row.last_status === null ? null : Number(row.last_status),
      LastError: row.last_error,
      NextAttempt: row.status === 'pending' ? httpDate(Number(row.next_attempt)) : null,
      Created: httpDate(Number(row.created)),
      Delivered: row.delivered === null ? null : httpDate(Number(row.delivered)),
    })),
  }
}
