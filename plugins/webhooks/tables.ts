import type { Generated } from '../../kernel/sdk.ts'

/**
 * The webhooks plugin's tables (issue 17): the tenant's webhooks, and the outbox of
 * events and their deliveries. Times are epoch milliseconds, as everywhere.
 */
export type WebhookTables = {
  webhooks: WebhooksTable
  webhook_events: WebhookEventsTable
  webhook_deliveries: WebhookDeliveriesTable
}

export interface WebhooksTable {
  id: Generated<number>
  parent: number
  custno: number
  url: string
  /** The event types it receives, comma-separated. */
  events: string
  /** The signing secret (whsec_...), sealed under the master key. */
  secret_enc: string
  disabled: number
  created: number
  updated: number
}

/** One event, written in the transaction of the change that caused it. */
export interface WebhookEventsTable {
  id: Generated<number>
  /** Unique when set: an event that may happen only once (KernelEvent.once). */
  once_key: string | null
  type: string
  parent: number
  custno: number
  /** The JSON body every delivery of it sends: { type, timestamp, data }. */
  payload: string
  created: number
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed'

/** One event for one webhook: sent until delivered, or failed after retryForMs. */
export interface WebhookDeliveriesTable {
  /** The `webhook-id` header, the same on every attempt (msg_...). */
  id: string
  event_id: number
  webhook_id: number
  parent: number
  custno: number
  type: string
  status: DeliveryStatus
  attempts: number
  last_status: number | null
  last_error: string | null
  next_attempt: number
  /** The process that is sending it now, until lease_until (a crashed sender's claim runs out). */
  lease_owner: string | null
  lease_until: number | null
  created: number
  delivered: number | null
}
