import { adminGroupName, type Plugin } from '../../kernel/sdk.ts'
import { webhookMigrations } from './migrations.ts'
import { webhookRoutes } from './routes.ts'

/**
 * The webhooks plugin (issue 17): a tenant's own systems hear when a key is about to
 * expire, runs low or changes, and when a people import finishes.
 *
 * Where to look:
 * - tables.ts / migrations.ts   webhooks, and the outbox of events and deliveries
 * - outbox.ts                   the kernel's events -> outbox rows, inside the change's transaction
 * - sender.ts                   the background sender: claims, attempts, backoff, failure
 * - signing.ts                  Standard Webhooks secrets and signatures
 * - addressGuard.ts             the SSRF guard: which addresses a delivery may reach
 * - webhookAdmin.ts / deliveries.ts / authority.ts   the routes' work and who may call them
 * - schemas.ts / routes.ts      what each route takes, and its handler
 * See docs/webhooks.md.
 */
const webhooksPlugin: Plugin = {
  name: 'webhooks',
  migrations: webhookMigrations,
  defaultGroups: [
    {
      // A group of its own, so an operator can take it from one administrator; on an upgrade it
      // reaches the keys that may create keys (the admin group's holders) and no other key.
      name: 'Webhook administration',
      alsoHeldBy: adminGroupName,
      paths: [
        { path: '/Api/Create/Webhook', displayName: "Create webhooks for your tenant's events (keys that may create keys)" },
        { path: '/Api/Edit/Webhook', displayName: 'Change or disable your webhooks' },
        { path: '/Api/Read/Webhooks', displayName: "List your tenant's webhooks" },
        { path: '/Api/Read/Deliveries', displayName: 'List the deliveries of your webhooks' },
      ],
    },
  ],
  // Each webhook's signing secret, sealed with `webhook:<id>` (webhookAdmin.ts): a master-key rotation re-seals it.
  sealedColumns: [{ table: 'webhooks', idColumn: 'id', column: 'secret_enc', contextPrefix: 'webhook:' }],
  setup: webhookRoutes,
}

export default webhooksPlugin
