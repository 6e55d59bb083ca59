import { useEffect, useState } from 'preact/hooks'
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
  const [fileError, setFileError] = useState<string | null>(null)
  const [dragging, setDragging] = useState(false)

  // The last sign-in's error stands until the key or secret changes.
  const [errorShown, setErrorShown] = useState(true)
  useEffect(() => setErrorShown(true), [error])

  async function readFile(file: File | undefined) {
    if (!file) return
    const credentials = keyFile(await file.text())
    if (!credentials) return setFileError(`Error: ${file.name} is not a key file (it needs Api_Key and Api_Secret).`)
    setFileError(null)
    setErrorShown(false)
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
      <form onSubmit={(event) => { event.preventDefault(); onSignIn({ apiKey: apiKey.trim(), secret: secret.trim() }) }}>
        <Field label="Api_Key">
          <input name="apiKey" autoComplete="off" required value={apiKey} onInput={(event) => { setApiKey(event.currentTarget.value); setErrorShown(false) }} />
        </Field>
        <Field label="Api_Secret">
          <input name="secret" type="password" autoComplete="off" required value={secret} onInput={(event) => { setSecret(event.currentTarget.value); setErrorShown(false) }} />
        </Field>
        <div class={dragging ? 'drop-zone dragging' : 'drop-zone'}>
          <p>Or drop <code>admin-key.json</code> here, or</p>
          <Field label="Choose a key file">
            <input type="file" accept="application/json,.json" onChange={(event) => void readFile(event.currentTarget.files?.[0])} />
          </Field>
        </div>
        <ErrorText error={fileError ?? (errorShown ? error : null)} />
        <button type="submit" disabled={busy}>{busy ? 'Signing in…' : 'Sign in'}</button>
      </form>
      <p class="note">The secret stays in this tab (session storage) and signs each call here; it is never sent, stored in a cookie or put in a URL.</p>
    </main>
  )
}
