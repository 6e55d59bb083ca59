import type { KernelServices } from '../../kernel/sdk.ts'

/** Config `webhooks` (kernel/boot/config.ts; docs/webhooks.md). */
export type WebhookSettings = NonNullable<KernelServices['config']['webhooks']>

/** The same values as config/defaults.json, for a config that has no `webhooks` at all (embedders, tests). */
const defaults: WebhookSettings = {
  allowHttp: false,
  allowAddresses: [],
  timeoutMs: 10_000,
  firstRetryMs: 5_000,
  maxRetryDelayMs: 3_600_000,
  retryForMs: 86_400_000,
  pollMs: 1_000,
  maxPerTenant: 20,
}

export function webhookSettings(config: KernelServices['config']): WebhookSettings {
  return { ...defaults, ...config.webhooks }
}
