import { useState } from 'preact/hooks'
import type { Api } from '../api.ts'
import { ErrorText, Field, PageTitle, Pager, SecretOnce, TableFrame, useAction, useFocusOnOpen, useLoad } from '../components.tsx'

/** The event types a webhook may ask for (plugins/webhooks/schemas.ts eventTypes; the console imports nothing from a plugin). */
const eventTypes = [
  ['key.expiring', "a key's EndDate is 7 days, then 1 day, away"],
  ['key.usage', "a key's MaxHits window, its tenant's quota or its credits reach 80 % and 100 %"],
  ['key.changed', 'a key was edited'],
  ['key.rotated', "a key's secret was rotated"],
  ['key.disabled', 'an edit ended a key that was in use'],
  ['people.import.finished', 'a people import finished'],
] as const
type EventType = (typeof eventTypes)[number][0]

/** A webhook as GET /Api/Read/Webhooks lists it (never its secret). */
interface Webhook { Id: number; Url: string; Events: EventType[]; Disabled: 0 | 1; Parent: number; Custno: number; Created: string }
/** Create answers { Id, Url, Events, Secret }; edit answers the webhook, plus Secret when one was given. */
interface WithSecret { Id: number; Secret?: string }
interface Delivery {
  Id: string
  WebhookId: number
  Event: EventType
  Status: 'pending' | 'delivered' | 'failed'
  Attempts: number
  LastStatus: number | null
  LastError: string | null
  NextAttempt: string | null
  Created: string
  Delivered: string | null
}
interface DeliveriesAnswer { Total: number; Page: number; Deliveries: Delivery[] }

interface WebhookForm { Url: string; Events: EventType[]; Secret: string; Disabled: boolean }
const emptyForm: WebhookForm = { Url: '', Events: [], Secret: '', Disabled: false }
interface DeliveryFilters { WebhookId: string; Event: string; Status: string; From: string; To: string }
const noFilters: DeliveryFilters = { WebhookId: '', Event: '', Status: '', From: '', To: '' }
const pageSize = 25

function WebhookFields({ form, onChange, editing }: { form: WebhookForm; onChange: (form: WebhookForm) => void; editing: boolean }) {
  const toggle = (type: EventType, on: boolean) => onChange({ ...form, Events: on ? [...form.Events, type] : form.Events.filter((event) => event !== type) })
  return (
    <>
      {/* Plain text, not type=url: every refusal (scheme, address) is the API's own text. */}
      <Field label="URL" hint="https:// (http:// only when the operator allows it); the address must be one deliveries may reach.">
        <input name="Url" inputMode="url" autoComplete="off" required maxLength={2048} value={form.Url} onInput={(event) => onChange({ ...form, Url: event.currentTarget.value })} />
      </Field>
      <fieldset>
        <legend>Events</legend>
        {eventTypes.map(([type, when]) => (
          <label class="check" key={type}>
            <input type="checkbox" name="Events" value={type} checked={form.Events.includes(type)} onChange={(event) => toggle(type, event.currentTarget.checked)} />
            <span><code>{type}</code> <small>({when})</small></span>
          </label>
        ))}
      </fieldset>
      <Field label={editing ? 'New signing secret (optional)' : 'Signing secret (optional)'} hint="whsec_ + base64 of 24 to 64 bytes; empty: keep it (edit) or make one (add).">
        <input name="Secret" autoComplete="off" maxLength={200} value={form.Secret} onInput={(event) => onChange({ ...form, Secret: event.currentTarget.value })} />
      </Field>
      {editing && (
        <label class="check">
          <input type="checkbox" name="Disabled" checked={form.Disabled} onChange={(event) => onChange({ ...form, Disabled: event.currentTarget.checked })} />
          <span>Disabled (no deliveries; pending ones fail)</span>
        </label>
      )}
    </>
  )
}

/** From a date field (YYYY-MM-DD) to the bound the API takes; To covers the whole day. */
const dateBound = (text: string, endOfDay: boolean) => (endOfDay ? `${text}T23:59:59.999Z` : text)

function deliveryBody(filters: DeliveryFilters, page: number) {
  return {
    Page: page,
    PageSize: pageSize,
    ...(filters.WebhookId ? { WebhookId: Number(filters.WebhookId) } : {}),
    ...(filters.Event ? { Event: filters.Event } : {}),
    ...(filters.Status ? { Status: filters.Status } : {}),
    ...(filters.From ? { From: dateBound(filters.From, false) } : {}),
    ...(filters.To ? { To: dateBound(filters.To, true) } : {}),
  }
}

/** Webhooks (docs/webhooks.md): list, add, edit (Url, Events, Disabled, new secret), and the deliveries. */
export function WebhooksPage({ api }: { api: Api }) {
  const hooks = useLoad(() => api.call<Webhook[]>('GET', '/Api/Read/Webhooks'))
  const [creating, setCreating] = useState(false)
  const [form, setForm] = useState<WebhookForm>(emptyForm)
  const [editing, setEditing] = useState<{ hook: Webhook; form: WebhookForm } | null>(null)
  const [secret, setSecret] = useState<{ title: string; secret: string } | null>(null)
  const [status, setStatus] = useState('')
  const action = useAction()
  const createForm = useFocusOnOpen<HTMLFormElement>(creating)
  const editForm = useFocusOnOpen<HTMLFormElement>(editing?.hook.Id)

  const mayDeliveries = api.may('POST', '/Api/Read/Deliveries')
  const [filters, setFilters] = useState<DeliveryFilters>(noFilters)
  const [applied, setApplied] = useState<DeliveryFilters>(noFilters)
  const [page, setPage] = useState(1)
  const deliveries = useLoad(() => mayDeliveries ? api.call<DeliveriesAnswer>('POST', '/Api/Read/Deliveries', deliveryBody(applied, page)) : Promise.resolve(null), [applied, page])
  const [shown, setShown] = useState<Delivery | null>(null)
  const deliveryPanel = useFocusOnOpen<HTMLElement>(shown?.Id)
  const pages = Math.max(1, Math.ceil((deliveries.data?.Total ?? 0) / pageSize))

  const create = (event: Event) => {
    event.preventDefault()
    void action.run(async () => {
      if (form.Events.length === 0) throw new Error('Error: Choose at least one event.')
      const made = await api.call<WithSecret>('POST', '/Api/Create/Webhook', { Url: form.Url.trim(), Events: form.Events, ...(form.Secret.trim() ? { Secret: form.Secret.trim() } : {}) })
      setSecret({ title: `Webhook ${made.Id} added`, secret: made.Secret! })
      setCreating(false)
      setForm(emptyForm)
      hooks.reload()
    })
  }
  const saveEdit = (event: Event) => {
    event.preventDefault()
    if (!editing) return
    const { hook, form: next } = editing
    void action.run(async () => {
      if (next.Events.length === 0) throw new Error('Error: Choose at least one event.')
      // The Url only when it changed: an unchanged one is not resolved and checked again.
      const saved = await api.call<WithSecret>('POST', '/Api/Edit/Webhook', {
        Id: hook.Id,
        ...(next.Url.trim() !== hook.Url ? { Url: next.Url.trim() } : {}),
        Events: next.Events,
        Disabled: next.Disabled ? 1 : 0,
        ...(next.Secret.trim() ? { Secret: next.Secret.trim() } : {}),
      })
      if (saved.Secret) setSecret({ title: `New signing secret of webhook ${hook.Id}`, secret: saved.Secret })
      setEditing(null)
      setStatus(`Webhook ${hook.Id} saved.`)
      hooks.reload()
    })
  }
  const setDisabled = (hook: Webhook, disabled: boolean) => action.run(async () => {
    await api.call('POST', '/Api/Edit/Webhook', { Id: hook.Id, Disabled: disabled ? 1 : 0 })
    setStatus(`Webhook ${hook.Id} ${disabled ? 'disabled' : 'enabled'}.`)
    hooks.reload()
  })
  const showDeliveriesOf = (hook: Webhook) => {
    const next = { ...noFilters, WebhookId: String(hook.Id) }
    setFilters(next)
    setApplied(next)
    setPage(1)
    setShown(null)
  }

  const mayCreate = api.may('POST', '/Api/Create/Webhook')
  const mayEdit = api.may('POST', '/Api/Edit/Webhook')
  return (
    <>
      <PageTitle>Webhooks</PageTitle>
      <p>Your systems hear, by a signed HTTP POST, when your tenant's keys expire, run low or change, and when a people import finishes.</p>
      {secret && <SecretOnce title={secret.title} secret={secret.secret} secretLabel="Signing secret" onDone={() => setSecret(null)} />}
      <ErrorText error={action.error ?? hooks.error} />
      <p role="status" class="status">{status}</p>
      {mayCreate && !creating && <div class="toolbar"><button type="button" onClick={() => action.switchForm(() => { setCreating(true); setForm(emptyForm) })}>Add webhook</button></div>}
      {creating && (
        <form class="panel" ref={createForm} onSubmit={create} aria-labelledby="webhook-create-title">
          <h2 id="webhook-create-title">Add a webhook</h2>
          <WebhookFields form={form} onChange={setForm} editing={false} />
          <div class="actions">
            <button type="submit" disabled={action.busy}>Add</button>
            <button type="button" class="secondary" onClick={() => action.switchForm(() => setCreating(false))}>Cancel</button>
          </div>
        </form>
      )}
      {hooks.loading && !hooks.data ? <p role="status">Loading webhooks…</p> : (
        <TableFrame label="Webhooks">
          <caption>{hooks.data?.length ?? 0} webhooks</caption>
          <thead><tr><th scope="col">Id</th><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Actions</th></tr></thead>
          <tbody>
            {(hooks.data ?? []).map((hook) => (
              <tr key={hook.Id} data-webhook-id={hook.Id}>
                <td>{hook.Id}</td>
                <th scope="row"><code>{hook.Url}</code></th>
                <td>{hook.Events.join(', ')}</td>
                <td>{hook.Disabled ? 'Disabled' : 'Active'}</td>
                <td>{hook.Created}</td>
                <td class="row-actions">
                  {mayEdit && <button type="button" class="secondary" aria-label={`Edit webhook ${hook.Id}`} onClick={() => action.switchForm(() => setEditing({ hook, form: { Url: hook.Url, Events: hook.Events, Secret: '', Disabled: hook.Disabled === 1 } }))}>Edit</button>}
                  {mayEdit && (hook.Disabled
                    ? <button type="button" class="secondary" aria-label={`Enable webhook ${hook.Id}`} disabled={action.busy} onClick={() => void setDisabled(hook, false)}>Enable</button>
                    : <button type="button" class="danger" aria-label={`Disable webhook ${hook.Id}`} disabled={action.busy} onClick={() => void setDisabled(hook, true)}>Disable</button>)}
                  {mayDeliveries && <button type="button" class="secondary" aria-label={`Deliveries of webhook ${hook.Id}`} onClick={() => showDeliveriesOf(hook)}>Deliveries</button>}
                </td>
              </tr>
            ))}
          </tbody>
        </TableFrame>
      )}
      {editing && (
        <form class="panel" ref={editForm} onSubmit={saveEdit} aria-labelledby="webhook-edit-title">
          <h2 id="webhook-edit-title">Edit webhook {editing.hook.Id}</h2>
          <WebhookFields form={editing.form} onChange={(next) => setEditing({ ...editing, form: next })} editing />
          <div class="actions">
            <button type="submit" disabled={action.busy}>Save</button>
            <button type="button" class="secondary" onClick={() => action.switchForm(() => setEditing(null))}>Cancel</button>
          </div>
        </form>
      )}
      {mayDeliveries && (
        <section aria-labelledby="deliveries-title">
          <h2 id="deliveries-title">Deliveries</h2>
          <form class="toolbar" aria-label="Delivery filters" onSubmit={(event) => { event.preventDefault(); setPage(1); setShown(null); setApplied(filters) }}>
            <Field label="Webhook">
              <select name="WebhookId" value={filters.WebhookId} onChange={(event) => setFilters({ ...filters, WebhookId: event.currentTarget.value })}>
                <option value="">All</option>
                {(hooks.data ?? []).map((hook) => <option key={hook.Id} value={String(hook.Id)}>{hook.Id}: {hook.Url}</option>)}
              </select>
            </Field>
            <Field label="Event">
              <select name="Event" value={filters.Event} onChange={(event) => setFilters({ ...filters, Event: event.currentTarget.value })}>
                <option value="">All</option>
                {eventTypes.map(([type]) => <option key={type} value={type}>{type}</option>)}
              </select>
            </Field>
            <Field label="Status">
              <select name="Status" value={filters.Status} onChange={(event) => setFilters({ ...filters, Status: event.currentTarget.value })}>
                <option value="">All</option>
                <option value="pending">pending</option>
                <option value="delivered">delivered</option>
                <option value="failed">failed</option>
              </select>
            </Field>
            <Field label="From"><input name="From" type="date" value={filters.From} onInput={(event) => setFilters({ ...filters, From: event.currentTarget.value })} /></Field>
            <Field label="To"><input name="To" type="date" value={filters.To} onInput={(event) => setFilters({ ...filters, To: event.currentTarget.value })} /></Field>
            <button type="submit">Filter</button>
            <button type="button" class="secondary" onClick={() => deliveries.reload()}>Refresh</button>
          </form>
          <ErrorText error={deliveries.error} />
          {deliveries.data && (
            <TableFrame label="Deliveries table">
              <caption>{deliveries.data.Total} deliveries, page {deliveries.data.Page} of {pages}</caption>
              <thead><tr><th scope="col">Delivery id</th><th scope="col">Webhook</th><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Created</th></tr></thead>
              <tbody>
                {deliveries.data.Deliveries.map((delivery) => (
                  <tr key={delivery.Id}>
                    <td><button type="button" class="link" aria-label={`Details of delivery ${delivery.Id}`} onClick={() => setShown(delivery)}><code>{delivery.Id}</code></button></td>
                    <td>{delivery.WebhookId}</td><td>{delivery.Event}</td><td>{delivery.Status}</td><td>{delivery.Attempts}</td><td>{delivery.Created}</td>
                  </tr>
                ))}
              </tbody>
            </TableFrame>
          )}
          <Pager page={page} pages={pages} onPage={setPage} />
          {shown && (
            <section class="panel" ref={deliveryPanel} aria-labelledby="delivery-title">
              <h3 id="delivery-title" tabIndex={-1}>Delivery <code>{shown.Id}</code></h3>
              <dl class="record">
                <dt>Webhook</dt><dd>{shown.WebhookId}</dd>
                <dt>Event</dt><dd>{shown.Event}</dd>
                <dt>Status</dt><dd data-testid="delivery-status">{shown.Status}</dd>
                <dt>Attempts</dt><dd>{shown.Attempts}</dd>
                <dt>Last HTTP status</dt><dd>{shown.LastStatus ?? '—'}</dd>
                <dt>Last error</dt><dd>{shown.LastError ?? '—'}</dd>
                <dt>Next attempt</dt><dd>{shown.NextAttempt ?? '—'}</dd>
                <dt>Created</dt><dd>{shown.Created}</dd>
                <dt>Delivered</dt><dd>{shown.Delivered ?? '—'}</dd>
              </dl>
              <button type="button" class="secondary" onClick={() => setShown(null)}>Close</button>
            </section>
          )}
        </section>
      )}
    </>
  )
}
