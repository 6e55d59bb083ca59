import { defineRoute, pagedListHeaders, type KernelServices, type Route } from '../../kernel/sdk.ts'
import type { WebhookTables } from './tables.ts'
import { createdWebhookAnswerSchema, createWebhookBodySchema, deliveriesAnswerSchema, editedWebhookAnswerSchema, editWebhookBodySchema, readDeliveriesBodySchema, webhooksAnswerSchema, type CreateWebhookBody, type EditWebhookBody, type ReadDeliveriesBody } from './schemas.ts'
import { WebhookAdmin, webhookColumns } from './webhookAdmin.ts'
import { deliveryColumns, readDeliveries } from './deliveries.ts'
import { AddressGuard } from './addressGuard.ts'
import { outboxWriter } from './outbox.ts'
import { WebhookSender } from './sender.ts'
import { webhookSettings } from './settings.ts'
import { requireKeyAdministrator } from './authority.ts'

/** Events as one CSV cell. */
const webhookRow = (webhook: { Events: string[] }) => ({ ...webhook, Events: webhook.Events.join(',') })

/**
 * Sets the plugin up on one kernel: the outbox subscribes to the kernel's events, the
 * sender starts polling (and stops when the kernel closes), and the routes. None is
 * cached: a change must show on the very next read, and deliveries move by themselves.
 */
export function webhookRoutes(kernel: KernelServices): Route[] {
  const settings = webhookSettings(kernel.config)
  const guard = new AddressGuard(settings.allowAddresses)
  const db = kernel.db.withTables<WebhookTables>()
  kernel.events.subscribe(outboxWriter(kernel.dialect, kernel.clock))
  const sender = new WebhookSender(db, kernel, settings, guard, kernel.log)
  // Only a serving process sends: an operator CLI run would cut its sends short when it exits.
  kernel.onServe(() => sender.start())
  kernel.onClose(() => sender.stop())
  const admin = new WebhookAdmin(kernel, db, settings, guard)
  // Who may manage webhooks, before the body's schema (docs/webhooks.md: other keys get 403).
  const permit = (caller: Parameters<typeof requireKeyAdministrator>[1]) => requireKeyAdministrator(kernel, caller)
  return [
    defineRoute<CreateWebhookBody>({
      method: 'POST',
      path: '/Api/Create/Webhook',
      dayCode: true,
      permit,
      body: createWebhookBodySchema,
      answer: createdWebhookAnswerSchema,
      xml: { root: 'Webhook' },
      csv: (result) => [webhookRow(result)],
      handler: (call) => admin.create(call),
    }),
    defineRoute<EditWebhookBody>({
      method: 'POST',
      path: '/Api/Edit/Webhook',
      dayCode: true,
      permit,
      body: editWebhookBodySchema,
      answer: editedWebhookAnswerSchema,
      xml: { root: 'Webhook' },
      csv: (result) => [webhookRow(result)],
      handler: (call) => admin.edit(call),
    }),
    defineRoute({
      method: 'GET',
      path: '/Api/Read/Webhooks',
      permit,
      answer: webhooksAnswerSchema,
      xml: { root: 'Webhooks', item: 'Webhook' },
      csv: (result: { Events: string[] }[]) => result.map(webhookRow),
      csvColumns: webhookColumns,
      handler: (call) => admin.list(call),
    }),
    defineRoute<ReadDeliveriesBody>({
      method: 'POST',
      path: '/Api/Read/Deliveries',
      permit,
      body: readDeliveriesBodySchema,
      answer: deliveriesAnswerSchema,
      xml: { root: 'Deliveries', item: 'Delivery', list: 'Deliveries' },
      // One CSV row per delivery; the totals go to headers as for other paged lists (D12).
      answerHeaders: pagedListHeaders({ csvOnly: true }),
      csv: (result: Awaited<ReturnType<typeof readDeliveries>>, call) => {
        call.setHeader('X-Total-Count', String(result.Total))
        call.setHeader('X-Page', String(result.Page))
        return result.Deliveries
      },
      csvColumns: deliveryColumns,
      handler: (call) => readDeliveries(db, call),
    }),
  ]
}
