import type { ComponentChildren, RefObject } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'

/** An API error as the API wrote it (`Error: ...`), announced to screen readers. */
export function ErrorText({ error }: { error: string | null }) {
  if (!error) return null
  return <p class="error" role="alert">{error}</p>
}

export function errorText(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error)
  return message.startsWith('Error:') ? message : `Error: ${message}`
}

/**
 * Runs an async action with a busy flag and the API's error text. `switchForm` opens or
 * leaves a form: the error shown was about the form before, so it goes.
 */
export function useAction(): { busy: boolean; error: string | null; run: (action: () => Promise<void>) => Promise<void>; setError: (error: string | null) => void; switchForm: (change: () => void) => void } {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string | null>(null)
  async function run(action: () => Promise<void>) {
    setBusy(true)
    setError(null)
    try {
      await action()
    } catch (caught) {
      setError(errorText(caught))
    } finally {
      setBusy(false)
    }
  }
  function switchForm(change: () => void) {
    setError(null)
    change()
  }
  return { busy, error, run, setError, switchForm }
}

/** Loads once (and again when `deps` change); `reload` fetches again. A load that fails drops the data of the one before: it answered another question. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []): { data: T | null; error: string | null; loading: boolean; reload: () => void } {
  const [data, setData] = useState<T | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [loading, setLoading] = useState(true)
  const [round, setRound] = useState(0)
  useEffect(() => {
    let current = true
    setLoading(true)
    load().then(
      (value) => { if (current) { setData(value); setError(null) } },
      (caught) => { if (current) { setData(null); setError(errorText(caught)) } },
    ).finally(() => { if (current) setLoading(false) })
    return () => { current = false }
  }, [...deps, round])
  // Loading from the moment a reload is asked, so what waits for the new list does not act on the old one.
  return { data, error, loading, reload: () => { setLoading(true); setRound((value) => value + 1) } }
}

/**
 * A secret shown once, right after it was made (a key's, with its Api_Key, or a
 * webhook's signing secret): with a copy button, gone when dismissed or when the page reloads (it is never stored anywhere).
 */
export function SecretOnce({ title, apiKey, secret, secretLabel = 'Api_Secret', note, onDone }: { title: string; apiKey?: string; secret: string; secretLabel?: string; note?: string; onDone: () => void }) {
  const [copied, setCopied] = useState(false)
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => heading.current?.focus(), [])
  async function copy() {
    await navigator.clipboard.writeText(secret).then(() => setCopied(true), () => setCopied(false))
  }
  return (
    <section class="secret-once" aria-labelledby="secret-once-title">
      <h2 id="secret-once-title" tabIndex={-1} ref={heading}>{title}</h2>
      <p>This secret is shown only now. Store it safely: the service keeps it encrypted and never shows it again.</p>
      {note && <p>{note}</p>}
      <dl>
        {apiKey !== undefined && <dt>Api_Key</dt>}
        {apiKey !== undefined && <dd><code data-testid="new-api-key">{apiKey}</code></dd>}
        <dt>{secretLabel}</dt>
        <dd><code data-testid="new-api-secret">{secret}</code></dd>
      </dl>
      <div class="actions">
        <button type="button" onClick={copy}>Copy secret</button>
        <span role="status">{copied ? 'Copied.' : ''}</span>
        <button type="button" class="secondary" onClick={onDone}>I have stored it</button>
      </div>
    </section>
  )
}

/**
 * A form or detail panel opened by a button: when `open` turns truthy (or names another
 * row) the panel is scrolled into view and its first field, or its heading (tabIndex -1)
 * when it has no field, takes the focus (one opened below a long table seemed to do nothing). When it
 * closes and the focus went with it to the page's body, the focus goes back to the control
 * that opened it, or to `returnTo` when that control went too (Create key, which its form
 * replaces).
 */
export function useFocusOnOpen<T extends HTMLElement>(open: unknown, returnTo?: RefObject<HTMLElement>) {
  const holder = useRef<T>(null)
  const opener = useRef<HTMLElement | null>(null)
  const wasOpen = useRef(false)
  useEffect(() => {
    const panel = holder.current
    if (open && panel) {
      const active = document.activeElement
      if (active instanceof HTMLElement && active !== document.body && !panel.contains(active)) opener.current = active
      panel.scrollIntoView({ block: 'start' })
      const first = panel.querySelector<HTMLElement>('input, select, textarea') ?? panel.querySelector<HTMLElement>('h2, h3')
      first?.focus({ preventScroll: true })
    } else if (!open && wasOpen.current && (document.activeElement === document.body || document.activeElement === null)) {
      const back = opener.current?.isConnected ? opener.current : returnTo?.current
      back?.focus()
    }
    wasOpen.current = Boolean(open)
    if (!open) opener.current = null
  }, [open])
  return holder
}

/**
 * Focus for a control that a change disables or replaces (a busy button, a dismissed
 * panel), which leaves it on the page's body: `focusNext(find)` gives it to what `find`
 * returns once the page has rendered with `waiting` false (no call or load under way).
 */
export function useFocusNext(waiting: boolean): (find: () => HTMLElement | null | undefined) => void {
  const [find, setFind] = useState<(() => HTMLElement | null | undefined) | null>(null)
  useEffect(() => {
    if (!find || waiting) return
    find()?.focus()
    setFind(null)
  }, [find, waiting])
  return (next) => setFind(() => next)
}

/** A labelled form field. */
export function Field({ label, children, hint }: { label: string; children: ComponentChildren; hint?: string }) {
  return (
    <label class="field">
      <span>{label}</span>
      {children}
      {hint && <small>{hint}</small>}
    </label>
  )
}

/** A page's heading, focused when the page opens so screen readers announce it. */
export function PageTitle({ children }: { children: ComponentChildren }) {
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => heading.current?.focus(), [])
  return <h1 tabIndex={-1} ref={heading}>{children}</h1>
}

/**
 * A table that scrolls sideways on a narrow screen instead of the page. Its region needs
 * a name of its own: inside a section named the same, two landmarks would share a name.
 */
export function TableFrame({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-frame" role="region" aria-label={label} tabIndex={0}>
      <table>{children}</table>
    </div>
  )
}

/** Previous/next buttons of a paged list (pages from 1); `of` names the list where a page has two. */
export function Pager({ page, pages, onPage, of }: { page: number; pages: number; onPage: (page: number) => void; of?: string }) {
  const name = (text: string) => (of ? `${text} of ${of}` : undefined)
  return (
    <div class="actions">
      <button type="button" class="secondary" aria-label={name('Previous page')} disabled={page <= 1} onClick={() => onPage(page - 1)}>Previous page</button>
      <button type="button" class="secondary" aria-label={name('Next page')} disabled={page >= pages} onClick={() => onPage(page + 1)}>Next page</button>
    </div>
  )
}
