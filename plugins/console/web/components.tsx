import type { ComponentChildren } from 'preact'
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
  return { data, error, loading, reload: () => setRound((value) => value + 1) }
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
 * For a form that opens in place of the button that opened it: when `open` turns true its
 * first field takes the focus, which would otherwise fall to the page's body with the button.
 */
export function useFocusOnOpen<T extends HTMLElement>(open: boolean) {
  const holder = useRef<T>(null)
  useEffect(() => {
    if (open) holder.current?.querySelector<HTMLElement>('input, select, textarea')?.focus()
  }, [open])
  return holder
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

/** Previous/next buttons of a paged list (pages from 1). */
export function Pager({ page, pages, onPage }: { page: number; pages: number; onPage: (page: number) => void }) {
  return (
    <div class="actions">
      <button type="button" class="secondary" disabled={page <= 1} onClick={() => onPage(page - 1)}>Previous page</button>
      <button type="button" class="secondary" disabled={page >= pages} onClick={() => onPage(page + 1)}>Next page</button>
    </div>
  )
}
