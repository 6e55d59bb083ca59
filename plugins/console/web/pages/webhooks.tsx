import { useState } from 'preact/hooks'
import type { Api } from '../api.ts'
import { ErrorText, Field, PageTitle, TableFrame, useAction, useLoad } from '../components.tsx'

interface Webhook { Id: number; Url: string; Events: string[] | string; Active?: number }
interface Created { Id: number; Url: string; Events: string[]; Secret: string }

const eventsText = (events: Webhook['Events']) => (Array.isArray(events) ? events.join(', ') : events)

/**
 * Webhooks (built against GET /Api/Read/Webhooks, POST /Api/Create/Webhook {Url, Events,
 * Secret?}, POST /Api/Edit/Webhook, POST /Api/Read/Deliveries): shown once those routes
 * exist and this key may call them.
 */
export function WebhooksPage({ api }: { api: Api }) {
  const hooks = useLoad(() => api.call<Webhook[]>('GET', '/Api/Read/Webhooks'))
  const [form, setForm] = useState({ Url: '', Events: '' })
  const [created, setCreated] = useState<Created | null>(null)
  const [deliveries, setDeliveries] = useState<{ id: number; rows: Record<string, unknown>[] } | null>(null)
  const action = useAction()
  const create = (event: Event) => {
    event.preventDefault()
    void action.run(async () => {
      setCreated(await api.call<Created>('POST', '/Api/Create/Webhook', { Url: form.Url.trim(), Events: form.Events.split(',').map((name) => name.trim()).filter(Boolean) }))
      setForm({ Url: '', Events: '' })
      hooks.reload()
    })
  }
  const showDeliveries = (id: number) => action.run(async () => {
    const answer = await api.call<unknown>('POST', '/Api/Read/Deliveries', { Id: id })
    const rows = Array.isArray(answer) ? answer : ((answer as { Deliveries?: Record<string, unknown>[] }).Deliveries ?? [])
    setDeliveries({ id, rows })
  })
  const setActive = (hook: Webhook, active: boolean) => action.run(async () => {
    await api.call('POST', '/Api/Edit/Webhook', { Id: hook.Id, Active: active ? 1 : 0 })
    hooks.reload()
  })
  return (
    <>
      <PageTitle>Webhooks</PageTitle>
      <ErrorText error={action.error ?? hooks.error} />
      {created && <p role="status" class="secret-once">Webhook {created.Id} created. Its signing secret, shown once: <code>{created.Secret}</code></p>}
      {api.may('POST', '/Api/Create/Webhook') && (
        <form class="panel" onSubmit={create} aria-labelledby="webhook-create-title">
          <h2 id="webhook-create-title">Add a webhook</h2>
          <Field label="URL"><input name="Url" type="url" required value={form.Url} onInput={(event) => setForm({ ...form, Url: event.currentTarget.value })} /></Field>
          <Field label="Events (comma-separated)"><input name="Events" required value={form.Events} onInput={(event) => setForm({ ...form, Events: event.currentTarget.value })} /></Field>
          <button type="submit" disabled={action.busy}>Add</button>
        </form>
      )}
      <TableFrame label="Webhooks">
        <thead><tr><th scope="col">Id</th><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Actions</th></tr></thead>
        <tbody>
          {(hooks.data ?? []).map((hook) => (
            <tr key={hook.Id}>
              <td>{hook.Id}</td><th scope="row">{hook.Url}</th><td>{eventsText(hook.Events)}</td>
              <td class="row-actions">
                {api.may('POST', '/Api/Read/Deliveries') && <button type="button" class="secondary" onClick={() => void showDeliveries(hook.Id)}>Deliveries</button>}
                {api.may('POST', '/Api/Edit/Webhook') && <button type="button" class="secondary" onClick={() => void setActive(hook, hook.Active === 0)}>{hook.Active === 0 ? 'Enable' : 'Disable'}</button>}
              </td>
            </tr>
          ))}
        </tbody>
      </TableFrame>
      {deliveries && (
        <section class="panel" aria-labelledby="deliveries-title">
          <h2 id="deliveries-title">Deliveries of webhook {deliveries.id}</h2>
          {deliveries.rows.length === 0 ? <p>No deliveries yet.</p> : <pre>{JSON.stringify(deliveries.rows, null, 2)}</pre>}
          <button type="button" class="secondary" onClick={() => setDeliveries(null)}>Close</button>
        </section>
      )}
    </>
  )
}
