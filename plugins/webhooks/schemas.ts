/**
 * JSON schemas of the webhooks plugin's bodies and answers (issue 17). Rules that need the network
 * (the URL's addresses) or the database are checked by the handlers.
 */
import { badRequest, recordListSchema, recordSchema } from '../../kernel/sdk.ts'

/** The event types a webhook may ask for. */
export const eventTypes = ['key.expiring', 'key.usage', 'key.changed', 'key.rotated', 'key.disabled', 'people.import.finished'] as const
export type WebhookEventType = (typeof eventTypes)[number]

const largestId = Number.MAX_SAFE_INTEGER
const id = { type: 'integer', minimum: 1, maximum: largestId }
const url = { type: 'string', minLength: 1, maxLength: 2048 }
/**
 * Events: an array of event types, or the same as one comma-separated string (as GroupId
 * takes a list either way, D9). One schema with a type list, so a violation names this
 * field plainly; the string's items are checked by `eventTypesOf`.
 */
const events = { type: ['array', 'string'], minLength: 1, maxLength: 500, minItems: 1, maxItems: eventTypes.length, uniqueItems: true, items: { type: 'string', enum: eventTypes } }
const secret = { type: 'string', minLength: 1, maxLength: 200 }
const dateText = { type: 'string', minLength: 1, maxLength: 64 }

export const createWebhookBodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['Url', 'Events'],
  properties: { Url: url, Events: events, Secret: secret },
} as const

export interface CreateWebhookBody {
  Url: string
  Events: WebhookEventType[] | string
  Secret?: string
}

/** Events as given (an array, or `key.changed, key.rotated`) -> the event types, in the order given; each once, as the array's schema says. */
export function eventTypesOf(events: WebhookEventType[] | string): WebhookEventType[] {
  if (Array.isArray(events)) return events
  const items = events.split(',').map((item) => item.trim())
  for (const [index, item] of items.entries()) {
    if (!(eventTypes as readonly string[]).includes(item)) throw badRequest(`Events: '${item}' is not an event type (${eventTypes.join(', ')}).`)
    // The same text as the array form's (kernel/http/schemaErrors.ts).
    if (items.indexOf(item) !== index) throw badRequest(`Events: '${item}' is given twice.`)
  }
  return items as WebhookEventType[]
}

/** Edit: the webhook's Id and what changes; Disabled 1 stops its deliveries (like a key's EndDate, without deleting it). */
export const editWebhookBodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['Id'],
  properties: { Id: id, Url: url, Events: events, Secret: secret, Disabled: { type: 'integer', enum: [0, 1] } },
} as const

export interface EditWebhookBody {
  Id: number
  Url?: string
  Events?: WebhookEventType[] | string
  Secret?: string
  Disabled?: 0 | 1
}

export const defaultPageSize = 100
export const maxPageSize = 1000

export const readDeliveriesBodySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    WebhookId: id,
    Event: { type: 'string', enum: eventTypes },
    Status: { type: 'string', enum: ['pending', 'delivered', 'failed'] },
    From: dateText,
    To: dateText,
    Page: { type: 'integer', minimum: 1, maximum: 1_000_000 },
    PageSize: { type: 'integer', minimum: 1, maximum: maxPageSize },
    // The spelling of the other paged reads (POST /Api/Read/Audit, History): one or the other per call.
    from: dateText,
    to: dateText,
    page: { type: 'integer', minimum: 1, maximum: 1_000_000 },
    size: { type: 'integer', minimum: 1, maximum: maxPageSize },
  },
} as const

export interface ReadDeliveriesBody {
  WebhookId?: number
  Event?: WebhookEventType
  Status?: 'pending' | 'delivered' | 'failed'
  From?: string
  To?: string
  Page?: number
  PageSize?: number
  from?: string
  to?: string
  page?: number
  size?: number
}

/*
 * JSON schemas of the answers (Route.answer): what the OpenAPI document shows a client
 * gets, built from webhookAdmin.ts and deliveries.ts. test/openapi-answers.test.ts
 * holds them to the real answers.
 */

const integer = { type: 'integer' }
const text = { type: 'string' }
const eventList = { type: 'array', items: text, description: 'The event types it is sent.' }
const secretAnswer = { type: 'string', description: 'The signing secret (whsec_...): shown only when it is set, never in a listing.' }

const webhookProperties = {
  Id: integer,
  Url: text,
  Events: eventList,
  Disabled: { type: 'integer', enum: [0, 1] },
  Parent: integer,
  Custno: integer,
  Created: { type: 'string', description: 'An HTTP-date (D9).' },
}

/** POST /Api/Create/Webhook: the new webhook and its secret, shown this once. */
export const createdWebhookAnswerSchema = recordSchema({ Id: integer, Url: text, Events: eventList, Secret: secretAnswer })

/** POST /Api/Edit/Webhook: the webhook as it is now; Secret only when the edit set one. */
export const editedWebhookAnswerSchema = { ...recordSchema(webhookProperties), properties: { ...webhookProperties, Secret: secretAnswer } }

/** GET /Api/Read/Webhooks. */
export const webhooksAnswerSchema = recordListSchema(webhookProperties)

/** POST /Api/Read/Deliveries: one page, newest first. */
export const deliveriesAnswerSchema = recordSchema({
  Total: integer,
  Page: integer,
  Deliveries: recordListSchema({
    Id: { type: 'string', description: 'The `webhook-id` its receiver saw (msg_...).' },
    WebhookId: integer,
    Event: text,
    Status: { type: 'string', enum: ['pending', 'delivered', 'failed'] },
    Attempts: integer,
    LastStatus: { type: ['integer', 'null'], description: 'The receiver\'s HTTP status on the last attempt.' },
    LastError: { type: ['string', 'null'] },
    NextAttempt: { type: ['string', 'null'], description: 'An HTTP-date while pending; null otherwise.' },
    Created: { type: 'string', description: 'An HTTP-date (D9).' },
    Delivered: { type: ['string', 'null'], description: 'An HTTP-date; null until delivered.' },
  }),
})
