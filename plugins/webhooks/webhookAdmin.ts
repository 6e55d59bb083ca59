import { badRequest, changedFields, forbidden, httpDate, notFound, retryOnDeadlock, type Call, type KernelServices, type Kysely, type Updateable } from '../../kernel/sdk.ts'
import type { WebhookTables, WebhooksTable } from './tables.ts'
import { eventTypesOf, type CreateWebhookBody, type EditWebhookBody } from './schemas.ts'
import { checkedWebhookSecret, newWebhookSecret } from './signing.ts'
import { AddressRefused, type AddressGuard } from './addressGuard.ts'
import type { WebhookSettings } from './settings.ts'
import { scopeOf, type WebhookScope } from './authority.ts'
import { eventList } from './outbox.ts'
import { disabledError } from './sender.ts'

/** One text for "no such webhook" and "not yours": no other tenant's webhook shows. */
const webhookNotFound = () => notFound('Webhook not found.')

/** The context a webhook's sealed secret is bound to. */
export const secretContext = (webhookId: number) => `webhook:${webhookId}`

/** What a webhook is shown as (never its secret). */
function webhookAnswer(row: Pick<WebhooksTable, 'url' | 'events' | 'disabled' | 'parent' | 'custno' | 'created'> & { id: number }) {
  return {
    Id: Number(row.id), Url: row.url, Events: eventList(row.events), Disabled: Number(row.disabled),
    Parent: Number(row.parent), Custno: Number(row.custno), Created: httpDate(Number(row.created)),
  }
}

/** The webhooks administration of one kernel: create, edit, list. */
export class WebhookAdmin {
  constructor(
    private readonly kernel: KernelServices,
    private readonly db: Kysely<WebhookTables>,
    private readonly settings: WebhookSettings,
    private readonly guard: AddressGuard,
  ) {}

  /** A URL deliveries may go to: https (http only when allowed), no credentials, and every address it resolves to permitted. */
  private async checkedUrl(text: string): Promise<string> {
    // The URL parser drops these (spaces at the ends, tabs and line breaks anywhere), so the Url shown would not be the one called.
    if (text !== text.trim() || /[\t\n\r]/.test(text)) throw badRequest('Url must not have spaces at either end, tabs or line breaks.')
    let url: URL
    try {
      url = new URL(text)
    } catch {
      // A scheme and // that still do not parse: the host or port is what is wrong.
      if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) throw badRequest('Url has a host or port that cannot be read (a port is 1-65535; an IPv6 address takes no zone id).')
      throw badRequest('Url must be an absolute URL (https://...).')
    }
    if (url.protocol !== 'https:' && !(this.settings.allowHttp && url.protocol === 'http:')) {
      throw badRequest(this.settings.allowHttp ? 'Url must start with https:// or http://.' : 'Url must start with https://.')
    }
    if (url.username !== '' || url.password !== '') throw badRequest('Url must not contain a user name or password.')
    if (url.hash !== '') throw badRequest('Url must not contain a fragment (#).')
    try {
      await this.guard.resolve(url.hostname)
    } catch (error) {
      if (error instanceof AddressRefused) throw badRequest(error.message)
      throw error
    }
    return text
  }

  private inScope(scope: WebhookScope) {
    return this.db.selectFrom('webhooks').where('parent', '=', scope.parent)
      .$if(scope.custno !== null, (query) => query.where('custno', '=', scope.custno!))
  }

  /**
   * Config `webhooks.maxPerTenant`, checked inside the create's transaction: a 403 like
   * a tenant entitlement's (D14). Disabled webhooks count too (there is no delete: an
   * edit reuses one). The tenant's rows are read FOR UPDATE on MySQL, which locks their
   * index range, so two concurrent creates count one after the other (a deadlock
   * between them is retried); SQLite runs one write transaction at a time.
   */
  private async ensureRoom(trx: Kysely<WebhookTables>, caller: { parent: number; custno: number }): Promise<void> {
    const max = this.settings.maxPerTenant
    const held = await trx.selectFrom('webhooks').select('id')
      .where('parent', '=', caller.parent).where('custno', '=', caller.custno)
      .$if(this.kernel.dialect === 'mysql', (query) => query.forUpdate())
      .execute()
    if (held.length >= max) throw forbidden(`Webhook limit reached: a tenant has at most ${max} webhooks (webhooks.maxPerTenant); edit a disabled one to reuse it.`)
  }

  async create(call: Call<CreateWebhookBody>) {
    const { body, caller } = call
    // Who may is judged by the route's permit, before the body's schema; then the body; then the network.
    const events = eventTypesOf(body.Events)
    const secret = body.Secret === undefined ? newWebhookSecret() : checkedWebhookSecret(body.Secret)
    const url = await this.checkedUrl(body.Url)
    const now = this.kernel.clock()
    const id = await retryOnDeadlock(() => this.db.transaction().execute(async (trx) => {
      await this.ensureRoom(trx, caller)
      const inserted = await trx.insertInto('webhooks').values({
        parent: caller.parent, custno: caller.custno, url, events: events.join(','), secret_enc: '', disabled: 0, created: now, updated: now,
      }).executeTakeFirstOrThrow()
      const webhookId = Number(inserted.insertId)
      await trx.updateTable('webhooks').set({ secret_enc: this.kernel.secrets.seal(secret, secretContext(webhookId)) }).where('id', '=', webhookId).execute()
      await this.kernel.audit.record(trx, call, { action: 'webhook.create', after: { Id: webhookId, Url: url, Events: events, Disabled: 0 } })
      return webhookId
    }))
    return { Id: id, Url: url, Events: events, Secret: secret }
  }

  async edit(call: Call<EditWebhookBody>) {
    const { body, caller } = call
    if (body.Url === undefined && body.Events === undefined && body.Secret === undefined && body.Disabled === undefined) {
      throw badRequest('Nothing to change: give Url, Events, Secret or Disabled.')
    }
    const events = body.Events === undefined ? undefined : eventTypesOf(body.Events)
    const secret = body.Secret === undefined ? undefined : checkedWebhookSecret(body.Secret)
    const found = await this.inScope(scopeOf(caller)).selectAll().where('id', '=', body.Id).executeTakeFirst()
    if (!found) throw webhookNotFound()
    const url = body.Url === undefined ? undefined : await this.checkedUrl(body.Url)
    const changes: Updateable<WebhooksTable> = { updated: this.kernel.clock() }
    if (url !== undefined) changes.url = url
    if (events !== undefined) changes.events = events.join(',')
    if (secret !== undefined) changes.secret_enc = this.kernel.secrets.seal(secret, secretContext(body.Id))
    if (body.Disabled !== undefined) changes.disabled = body.Disabled
    // The audit record names what changed, as the API does; a new secret only as SecretReplaced, never its value.
    const was = webhookAnswer(found)
    const changed = changedFields(
      { Url: was.Url, Events: was.Events, Disabled: was.Disabled },
      { Url: url ?? was.Url, Events: events ?? was.Events, Disabled: body.Disabled ?? was.Disabled },
    )
    const before = { Id: body.Id, ...changed.before }
    const after = { Id: body.Id, ...changed.after, ...(secret === undefined ? {} : { SecretReplaced: 1 }) }
    await this.db.transaction().execute(async (trx) => {
      await trx.updateTable('webhooks').set(changes).where('id', '=', body.Id).execute()
      // An edit that changes nothing (Disabled 1 again, the same Url) is no administrative change.
      if (Object.keys(after).length > 1) {
        await this.kernel.audit.record(trx, call, { action: body.Disabled === 1 && was.Disabled === 0 ? 'webhook.disable' : 'webhook.edit', before, after })
      }
      // Disabling fails what is still pending: nothing queued before is sent later, to whatever Url the webhook has then.
      if (body.Disabled === 1) {
        await trx.updateTable('webhook_deliveries').set({ status: 'failed', last_error: disabledError, lease_owner: null, lease_until: null })
          .where('webhook_id', '=', body.Id).where('status', '=', 'pending').execute()
      }
    })
    const row = await this.inScope(scopeOf(caller)).selectAll().where('id', '=', body.Id).executeTakeFirstOrThrow()
    // A secret given here is shown back once, like a new webhook's.
    return { ...webhookAnswer(row), ...(secret === undefined ? {} : { Secret: secret }) }
  }

  async list(call: Call) {
    const rows = await this.inScope(scopeOf(call.caller)).selectAll().orderBy('id').execute()
    return rows.map(webhookAnswer)
  }
}

/** The CSV header of a webhook row. */
export const webhookColumns = ['Id', 'Url', 'Events', 'Disabled', 'Parent', 'Custno', 'Created'] as const
