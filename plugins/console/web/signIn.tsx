import { useEffect, useRef, useState } from 'preact/hooks'
import { Field, ErrorText } from './components.tsx'
import type { Credentials } from './signing.ts'

/** The fields of admin-key.json (D10): `{"Id","Api_Key","Api_Secret"}`. */
function keyFile(text: string): Credentials | null {
  try {
    const parsed = JSON.parse(text)
    return typeof parsed?.Api_Key === 'string' && typeof parsed?.Api_Secret === 'string' ? { apiKey: parsed.Api_Key, secret: parsed.Api_Secret } : null
  } catch {
    return null
  }
}

/**
 * Sign-in with an Api_Key and its secret, typed, or filled from an admin-key.json
 * dropped on the page or chosen with the file button. Nothing is sent but signed calls.
 */
export function SignIn({ onSignIn, error, busy }: { onSignIn: (credentials: Credentials) => void; error: string | null; busy: boolean }) {
  const [apiKey, setApiKey] = useState('')
  const [secret, setSecret] = useState('')
  // An error found here, before anything is sent: a file that is not a key file, a key or secret of spaces only.
  const [formError, setFormError] = useState<string | null>(null)
  const [dragging, setDragging] = useState(false)
  const firstField = useRef<HTMLInputElement>(null)

  // The last sign-in's error stands until the key or secret changes. The Sign in button
  // was disabled while it ran, so the focus goes to the first field (the error is announced).
  const [errorShown, setErrorShown] = useState(true)
  useEffect(() => {
    setErrorShown(true)
    if (error) firstField.current?.focus()
  }, [error])
  const edited = () => {
    setErrorShown(false)
    setFormError(null)
  }

  function submit(event: Event) {
    event.preventDefault()
    const credentials = { apiKey: apiKey.trim(), secret: secret.trim() }
    // Spaces only pass `required`; signed, they would fail as WebCrypto's "HMAC key data must not be empty".
    if (credentials.apiKey === '' || credentials.secret === '') {
      setFormError('Error: Api_Key and Api_Secret must not be empty.')
      firstField.current?.focus()
      return
    }
    onSignIn(credentials)
  }

  async function readFile(file: File | undefined) {
    if (!file) return
    const credentials = keyFile(await file.text())
    if (!credentials) return setFormError(`Error: ${file.name} is not a key file (it needs Api_Key and Api_Secret).`)
    edited()
    setApiKey(credentials.apiKey)
    setSecret(credentials.secret)
  }

  // A file dropped anywhere in the window, not only on the form: the browser would otherwise open it in the tab, secret and all.
  useEffect(() => {
    const over = (event: DragEvent) => {
      event.preventDefault()
      setDragging(true)
    }
    const leave = () => setDragging(false)
    const drop = (event: DragEvent) => {
      event.preventDefault()
      setDragging(false)
      void readFile(event.dataTransfer?.files[0])
    }
    addEventListener('dragover', over)
    addEventListener('dragleave', leave)
    addEventListener('drop', drop)
    return () => {
      removeEventListener('dragover', over)
      removeEventListener('dragleave', leave)
      removeEventListener('drop', drop)
    }
  }, [])

  return (
    <main id="main" class="sign-in">
      <h1>Sign in to keygate</h1>
      <p>Use an API key and its secret, for example the admin key printed at the first start (also in <code>data/admin-key.json</code>).</p>
      <form onSubmit={submit}>
        <Field label="Api_Key">
          <input name="apiKey" ref={firstField} autoComplete="off" required value={apiKey} onInput={(event) => { setApiKey(event.currentTarget.value); edited() }} />
        </Field>
        <Field label="Api_Secret">
          <input name="secret" type="password" autoComplete="off" required value={secret} onInput={(event) => { setSecret(event.currentTarget.value); edited() }} />
        </Field>
        <div class={dragging ? 'drop-zone dragging' : 'drop-zone'}>
          <p>Or drop <code>admin-key.json</code> here, or</p>
          <Field label="Choose a key file">
            <input type="file" accept="application/json,.json" onChange={(event) => void readFile(event.currentTarget.files?.[0])} />
          </Field>
        </div>
        <ErrorText error={formError ?? (errorShown ? error : null)} />
        <button type="submit" disabled={busy}>{busy ? 'Signing in…' : 'Sign in'}</button>
      </form>
      <p class="note">The secret stays in this tab (session storage) and signs each call here; it is never sent, stored in a cookie or put in a URL.</p>
    </main>
  )
}
