import type { Dialect, KernelEvent, Kysely } from '../../kernel/sdk.ts'
import type { WebhookTables } from './tables.ts'
import { newMessageId } from './signing.ts'

/** The webhooks of one tenant: its own, and its Parent's parent-wide ones (Custno 0, D9). */
export function tenantWebhooks(db: Kysely<WebhookTables>, parent: number, custno: number) {
  return db.selectFrom('webhooks')
    .where('parent', '=', parent)
    .where((where) => where.or([where('custno', '=', custno), where('custno', '=', 0)]))
}

export function eventList(stored: string): string[] {
  return stored.split(',')
}

/**
 * The transactional outbox (issue 17): runs inside the transaction of the change that
 * causes the event, and writes the event and one delivery per webhook of its tenant
 * that asked for its type. Nothing is written when no webhook wants it. An event that
 * may happen only once (`once`) is inserted or ignored: when another process (or an
 * earlier scan) wrote it first, this one writes nothing.
 */
export function outboxWriter(dialect: Dialect, clock: () => number) {
  return async (trx: Kysely<any>, event: KernelEvent): Promise<boolean> => {
    const db = trx as Kysely<WebhookTables>
    const hooks = (await tenantWebhooks(db, event.parent, event.custno).select(['id', 'events']).where('disabled', '=', 0).execute())
      .filter((hook) => eventList(hook.events).includes(event.type))
    // No webhook wants it: say so, so an event noticed outside a change (an expiry warning) is offered again later.
    if (hooks.length === 0) return false
    const now = clock()
    const payload = JSON.stringify({ type: event.type, timestamp: new Date(now).toISOString(), data: event.data })
    const row = { once_key: event.once ?? null, type: event.type, parent: event.parent, custno: event.custno, payload, created: now }
    let eventId: number
    if (event.once === undefined) {
      eventId = Number((await db.insertInto('webhook_events').values(row).executeTakeFirstOrThrow()).insertId)
    } else {
      const inserted = await db.insertInto('webhook_events').values(row).$call((insert) => dialect === 'mysql' ? insert.ignore() : insert.orIgnore()).executeTakeFirstOrThrow()
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 0) return true
      eventId = Number((await db.selectFrom('webhook_events').select('id').where('once_key', '=', event.once).executeTakeFirstOrThrow()).id)
    }
    await db.insertInto('webhook_deliveries').values(hooks.map((hook) => ({
      id: newMessageId(), event_id: eventId, webhook_id: Number(hook.id), parent: event.parent, custno: event.custno, type: event.type,
      status: 'pending' as const, attempts: 0, next_attempt: now, created: now,
    }))).execute()
    return true
  }
}

