import { useMemo, useRef, useState } from 'preact/hooks'
import type { Api } from '../api.ts'
import { ErrorText, Field, PageTitle, SecretOnce, TableFrame, useAction, useFocusNext, useFocusOnOpen, useLoad } from '../components.tsx'

/** A key as GET /Api/Read/Keys lists it (plugins/keys/listings.ts KeyListing). */
interface KeyListing {
  Id: number
  Api_Key: string
  Display_Name: string
  Email: string | null
  StartDate: string | null
  EndDate: string | null
  Active: 0 | 1
  DayPass: number
  Require_Https: number
  LogLevel: number
  MaxHits: string
  Groups: { Id: number; Display_Name: string }[]
  Created: string
}
interface Group { Id: number; Display_Name: string; Paths: string[] }
interface IssuedKey { Id: number; Api_Key: string; Api_Secret: string; Name: string; MaxHits: string; OldSecretEnds?: string }

type SortKey = 'name' | 'created' | 'status'

/** StartDate and EndDate as the date-time fields hold them: UTC, YYYY-MM-DDTHH:MM[:SS], '' for none. */
interface KeyForm { Display_Name: string; Email: string; MaxHits: string; StartDate: string; EndDate: string; GroupIds: number[]; Require_Https: boolean; DayPass: boolean; LogLevel: number }
const emptyForm: KeyForm = { Display_Name: '', Email: '', MaxHits: '', StartDate: '', EndDate: '', GroupIds: [], Require_Https: true, DayPass: false, LogLevel: 0 }

/** A date of the API (an HTTP-date, or null) as a UTC date-time field's value. */
function fieldDate(date: string | null): string {
  return date === null ? '' : new Date(date).toISOString().slice(0, 19)
}

/** A UTC date-time field's value as RFC 3339 (docs/keys.md); empty is null: no start (from now on create), no end. */
function apiDate(value: string): string | null {
  return value === '' ? null : `${new Date(`${value}Z`).toISOString().slice(0, 19)}Z`
}

/** The create body: what the form holds (an edit sends only what changed: changedBody). */
function keyBody(form: KeyForm) {
  return {
    Display_Name: form.Display_Name.trim(),
    Email: form.Email.trim() === '' ? null : form.Email.trim(),
    MaxHits: form.MaxHits.trim() === '' ? null : form.MaxHits.trim(),
    StartDate: apiDate(form.StartDate),
    EndDate: apiDate(form.EndDate),
    GroupId: form.GroupIds,
    Require_Https: form.Require_Https ? 1 : 0,
    DayPass: form.DayPass ? 1 : 0,
    LogLevel: form.LogLevel,
  }
}

/**
 * An edit's body: only the fields the form changed (interface 4.2: the rest may be
 * omitted), so a value the form does not offer (a LogLevel above 2) stays as it is and the
 * audit trail records only what the user changed.
 */
function changedBody(original: KeyForm, form: KeyForm): Record<string, unknown> {
  const before: Record<string, unknown> = keyBody(original)
  return Object.fromEntries(Object.entries(keyBody(form)).filter(([name, value]) => JSON.stringify(value) !== JSON.stringify(before[name])))
}

/*
 * `now` below is the server's (Api.serverNow): the dates compared are the server's, and a
 * browser clock that is off would misjudge them.
 */

/** A key whose StartDate is still to come: inactive, but not disabled (Enable would change nothing). */
function notYet(key: KeyListing, now: number): boolean {
  return key.Active === 0 && key.StartDate !== null && Date.parse(key.StartDate) > now && (key.EndDate === null || Date.parse(key.EndDate) > now)
}

function keyState(key: KeyListing, now: number): string {
  const ends = key.EndDate ? `; ends ${key.EndDate}` : ''
  if (key.Active) return `Active${ends}`
  if (notYet(key, now)) return `Not active yet: starts ${key.StartDate}${ends}`
  return `Disabled${key.EndDate ? ` since ${key.EndDate}` : ''}`
}

/** An EndDate still to come, which Disable (EndDate now) replaces. */
function plannedEnd(key: KeyListing, now: number): string | null {
  return key.EndDate !== null && Date.parse(key.EndDate) > now ? key.EndDate : null
}

/** What a rotation's answer says of the old secret: an overlap of none ends it at the rotation itself. */
function oldSecretNote(ends: string | undefined, now: number): string | undefined {
  if (!ends) return undefined
  return Date.parse(ends) > now ? `The old secret keeps working until ${ends}.` : 'The old secret no longer works.'
}

function KeyFields({ form, groups, onChange, idPrefix }: { form: KeyForm; groups: Group[]; onChange: (form: KeyForm) => void; idPrefix: string }) {
  const toggleGroup = (id: number, on: boolean) => onChange({ ...form, GroupIds: on ? [...form.GroupIds, id] : form.GroupIds.filter((group) => group !== id) })
  return (
    <>
      <Field label="Name (Display_Name)">
        <input name="Display_Name" required maxLength={255} value={form.Display_Name} onInput={(event) => onChange({ ...form, Display_Name: event.currentTarget.value })} />
      </Field>
      <Field label="Email (optional)">
        <input name="Email" type="email" maxLength={255} value={form.Email} onInput={(event) => onChange({ ...form, Email: event.currentTarget.value })} />
      </Field>
      <Field label="Rate limit (MaxHits, optional)" hint="For example 10/1Sec,1000/1Hour; empty: no limit.">
        <input name="MaxHits" maxLength={200} value={form.MaxHits} onInput={(event) => onChange({ ...form, MaxHits: event.currentTarget.value })} />
      </Field>
      <Field label="Starts (StartDate, UTC, optional)" hint="Empty: from now on.">
        <input name="StartDate" type="datetime-local" step={1} value={form.StartDate} onInput={(event) => onChange({ ...form, StartDate: event.currentTarget.value })} />
      </Field>
      <Field label="Ends (EndDate, UTC, optional)" hint="Empty: never ends. Disable sets it to now.">
        <input name="EndDate" type="datetime-local" step={1} value={form.EndDate} onInput={(event) => onChange({ ...form, EndDate: event.currentTarget.value })} />
      </Field>
      <Field label="Log level">
        <select name="LogLevel" value={String(form.LogLevel)} onChange={(event) => onChange({ ...form, LogLevel: Number(event.currentTarget.value) })}>
          <option value="0">0 minimal</option>
          <option value="1">1 medium</option>
          <option value="2">2 full details</option>
          {form.LogLevel > 2 && <option value={String(form.LogLevel)}>{form.LogLevel} full details</option>}
        </select>
      </Field>
      <fieldset>
        <legend>Groups (what the key may call)</legend>
        {groups.length === 0 && <p>No group you may assign.</p>}
        {groups.map((group) => (
          <label class="check" key={group.Id}>
            <input type="checkbox" id={`${idPrefix}-group-${group.Id}`} checked={form.GroupIds.includes(group.Id)} onChange={(event) => toggleGroup(group.Id, event.currentTarget.checked)} />
            <span>{group.Display_Name} <small>({group.Paths.join(', ')})</small></span>
          </label>
        ))}
      </fieldset>
      <label class="check">
        <input type="checkbox" name="Require_Https" checked={form.Require_Https} onChange={(event) => onChange({ ...form, Require_Https: event.currentTarget.checked })} />
        <span>Require HTTPS (calls over plain HTTP are refused){location.protocol === 'http:' && <small> This service is reached over plain HTTP here: untick it for a key to be called at this address.</small>}</span>
      </label>
      <label class="check">
        <input type="checkbox" name="DayPass" checked={form.DayPass} onChange={(event) => onChange({ ...form, DayPass: event.currentTarget.checked })} />
        <span>Every call needs the day code</span>
      </label>
    </>
  )
}

function formOf(key: KeyListing): KeyForm {
  return { Display_Name: key.Display_Name, Email: key.Email ?? '', MaxHits: key.MaxHits, StartDate: fieldDate(key.StartDate), EndDate: fieldDate(key.EndDate), GroupIds: key.Groups.map((group) => group.Id), Require_Https: key.Require_Https === 1, DayPass: key.DayPass === 1, LogLevel: key.LogLevel }
}

const overlaps = [[0, 'none (the old secret stops at once)'], [300, '5 minutes'], [3600, '1 hour'], [86_400, '1 day'], [604_800, '7 days']] as const

/** Keys: the keys you created; search, sort, create, edit, disable/enable, rotate. */
export function KeysPage({ api }: { api: Api }) {
  const keys = useLoad(() => api.call<KeyListing[]>('GET', '/Api/Read/Keys'))
  const groups = useLoad(() => api.may('GET', '/Api/Read/Groups') ? api.call<Group[]>('GET', '/Api/Read/Groups') : Promise.resolve([]))
  const [search, setSearch] = useState('')
  const [sort, setSort] = useState<SortKey>('name')
  const [creating, setCreating] = useState(false)
  const [form, setForm] = useState<KeyForm>(emptyForm)
  const [editing, setEditing] = useState<{ id: number; original: KeyForm; form: KeyForm } | null>(null)
  const [rotating, setRotating] = useState<{ id: number; overlap: number } | null>(null)
  // rotated: the key whose Rotate made the secret shown (undefined: Create key made it).
  const [issued, setIssued] = useState<{ title: string; key: IssuedKey; rotated?: number } | null>(null)
  const [status, setStatus] = useState('')
  const action = useAction()
  const createButton = useRef<HTMLButtonElement>(null)
  const createForm = useFocusOnOpen<HTMLFormElement>(creating, createButton)
  const editForm = useFocusOnOpen<HTMLFormElement>(editing?.id)
  const rotateForm = useFocusOnOpen<HTMLFormElement>(rotating?.id)
  const focusNext = useFocusNext(action.busy || keys.loading)
  const rowButton = (id: number, name: 'toggle' | 'rotate') => document.querySelector<HTMLElement>(`tr[data-key-id="${id}"] button[data-action="${name}"]`)

  const shown = useMemo(() => {
    const needle = search.trim().toLowerCase()
    const list = (keys.data ?? []).filter((key) => needle === '' || [key.Display_Name, key.Api_Key, key.Email ?? '', ...key.Groups.map((group) => group.Display_Name)].some((text) => text.toLowerCase().includes(needle)))
    const order: Record<SortKey, (a: KeyListing, b: KeyListing) => number> = {
      name: (a, b) => a.Display_Name.localeCompare(b.Display_Name),
      created: (a, b) => Date.parse(b.Created) - Date.parse(a.Created) || b.Id - a.Id,
      status: (a, b) => b.Active - a.Active || a.Display_Name.localeCompare(b.Display_Name),
    }
    return [...list].sort(order[sort])
  }, [keys.data, search, sort])

  const create = (event: Event) => {
    event.preventDefault()
    void action.run(async () => {
      const key = await api.call<IssuedKey>('POST', '/Api/Create/Key', keyBody(form))
      setIssued({ title: `Key "${key.Name}" created`, key })
      setCreating(false)
      setForm(emptyForm)
      keys.reload()
    })
  }
  const saveEdit = (event: Event) => {
    event.preventDefault()
    if (!editing) return
    void action.run(async () => {
      const changes = changedBody(editing.original, editing.form)
      if (Object.keys(changes).length > 0) await api.call('POST', '/Api/Edit/Key', { KeyId: editing.id, ...changes })
      setEditing(null)
      setStatus(Object.keys(changes).length > 0 ? 'Key saved.' : 'Nothing changed.')
      keys.reload()
    })
  }
  const setActive = (key: KeyListing, active: boolean) => {
    // Disabling sets EndDate to now (docs/keys.md), replacing a planned end: said before and after, never silently.
    const planned = active ? null : plannedEnd(key, api.serverNow())
    if (planned && !confirm(`Disable "${key.Display_Name}" now? Its planned end date ${planned} is replaced by now (the audit trail keeps it); after Enable the key has no end date until Edit sets one.`)) return
    // The button is disabled while the call runs and replaced after it: the focus goes to the row's new one.
    focusNext(() => rowButton(key.Id, 'toggle'))
    void action.run(async () => {
      // Enabling clears EndDate. Now is the server's: a browser clock ahead would set an end still to come.
      await api.call('POST', '/Api/Edit/Key', { KeyId: key.Id, EndDate: active ? null : new Date(api.serverNow()).toUTCString() })
      setStatus(active ? `Key "${key.Display_Name}" enabled, with no end date.`
        : `Key "${key.Display_Name}" disabled.${planned ? ` Its planned end date ${planned} was replaced by now (the audit trail keeps it).` : ''}`)
      keys.reload()
    })
  }
  const rotate = (event: Event) => {
    event.preventDefault()
    if (!rotating) return
    void action.run(async () => {
      const key = await api.call<IssuedKey>('POST', '/Api/Rotate/Key', { KeyId: rotating.id, OldSecretValidFor: rotating.overlap })
      setRotating(null)
      setIssued({ title: `New secret for "${key.Name}"`, key, rotated: rotating.id })
      keys.reload()
    })
  }

  const mayCreate = api.may('POST', '/Api/Create/Key')
  const mayEdit = api.may('POST', '/Api/Edit/Key')
  const mayRotate = api.may('POST', '/Api/Rotate/Key')
  return (
    <>
      <PageTitle>Keys</PageTitle>
      <p>The keys your key created. A key works until it is disabled; its secret is shown once, when it is made or rotated.</p>
      {issued && (
        <SecretOnce title={issued.title} apiKey={issued.key.Api_Key} secret={issued.key.Api_Secret}
          note={oldSecretNote(issued.key.OldSecretEnds, api.serverNow())}
          onDone={() => {
            const rotated = issued.rotated
            setIssued(null)
            focusNext(() => (rotated === undefined ? createButton.current : rowButton(rotated, 'rotate')) ?? document.querySelector('h1'))
          }} />
      )}
      <ErrorText error={action.error ?? keys.error ?? groups.error} />
      <p role="status" class="status">{status}</p>
      <div class="toolbar">
        <Field label="Search keys">
          <input type="search" name="search" value={search} onInput={(event) => setSearch(event.currentTarget.value)} />
        </Field>
        <Field label="Sort by">
          <select name="sort" value={sort} onChange={(event) => setSort(event.currentTarget.value as SortKey)}>
            <option value="name">Name</option>
            <option value="created">Newest first</option>
            <option value="status">Active first</option>
          </select>
        </Field>
        {mayCreate && !creating && <button type="button" ref={createButton} onClick={() => action.switchForm(() => { setCreating(true); setForm(emptyForm) })}>Create key</button>}
      </div>
      {creating && (
        <form class="panel" ref={createForm} onSubmit={create} aria-labelledby="create-title">
          <h2 id="create-title">Create a key</h2>
          <KeyFields form={form} groups={groups.data ?? []} onChange={setForm} idPrefix="create" />
          <div class="actions">
            <button type="submit" disabled={action.busy}>Create</button>
            <button type="button" class="secondary" onClick={() => action.switchForm(() => setCreating(false))}>Cancel</button>
          </div>
        </form>
      )}
      {keys.loading && !keys.data ? <p role="status">Loading keys…</p> : (
        <TableFrame label="Keys">
          <caption>{shown.length} of {keys.data?.length ?? 0} keys</caption>
          <thead><tr><th scope="col">Name</th><th scope="col">Api_Key</th><th scope="col">Groups</th><th scope="col">Status</th><th scope="col">MaxHits</th><th scope="col">Actions</th></tr></thead>
          <tbody>
            {shown.map((key) => (
              <tr key={key.Id} data-key-id={key.Id}>
                <th scope="row">{key.Display_Name}</th>
                <td><code>{key.Api_Key}</code></td>
                <td>{key.Groups.map((group) => group.Display_Name).join(', ')}</td>
                <td>{keyState(key, api.serverNow())}</td>
                <td>{key.MaxHits || 'none'}</td>
                <td class="row-actions">
                  {mayEdit && <button type="button" class="secondary" aria-label={`Edit ${key.Display_Name}`} onClick={() => action.switchForm(() => setEditing({ id: key.Id, original: formOf(key), form: formOf(key) }))}>Edit</button>}
                  {mayEdit && !notYet(key, api.serverNow()) && (key.Active
                    ? <button type="button" class="danger" data-action="toggle" aria-label={`Disable ${key.Display_Name}`} disabled={action.busy} onClick={() => setActive(key, false)}>Disable</button>
                    : <button type="button" class="secondary" data-action="toggle" aria-label={`Enable ${key.Display_Name}`} disabled={action.busy} onClick={() => setActive(key, true)}>Enable</button>)}
                  {mayRotate && <button type="button" class="secondary" data-action="rotate" aria-label={`Rotate ${key.Display_Name}`} onClick={() => action.switchForm(() => setRotating({ id: key.Id, overlap: 3600 }))}>Rotate</button>}
                </td>
              </tr>
            ))}
          </tbody>
        </TableFrame>
      )}
      {editing && (
        <form class="panel" ref={editForm} onSubmit={saveEdit} aria-labelledby="edit-title">
          <h2 id="edit-title">Edit key {editing.form.Display_Name}</h2>
          <KeyFields form={editing.form} groups={groups.data ?? []} onChange={(next) => setEditing({ ...editing, form: next })} idPrefix="edit" />
          <div class="actions">
            <button type="submit" disabled={action.busy}>Save</button>
            <button type="button" class="secondary" onClick={() => action.switchForm(() => setEditing(null))}>Cancel</button>
          </div>
        </form>
      )}
      {rotating && (
        <form class="panel" ref={rotateForm} onSubmit={rotate} aria-labelledby="rotate-title">
          <h2 id="rotate-title">Rotate the secret</h2>
          <p>A new secret is made now. Callers still using the old one keep working for the overlap you choose.</p>
          <Field label="Old secret keeps working for">
            <select name="overlap" value={String(rotating.overlap)} onChange={(event) => setRotating({ ...rotating, overlap: Number(event.currentTarget.value) })}>
              {overlaps.map(([seconds, label]) => <option key={seconds} value={String(seconds)}>{label}</option>)}
            </select>
          </Field>
          <div class="actions">
            <button type="submit" disabled={action.busy}>Rotate now</button>
            <button type="button" class="secondary" onClick={() => action.switchForm(() => setRotating(null))}>Cancel</button>
          </div>
        </form>
      )}
    </>
  )
}
