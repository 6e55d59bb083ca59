import { useEffect, useState } from 'preact/hooks'
import { Api, ApiError, loadBasePath } from './api.ts'
import { errorText } from './components.tsx'
import { DayCodeDialog, type DayCodeRequest } from './dayCodeDialog.tsx'
import { forgetSession, storeCredentials, storedCredentials } from './session.ts'
import { signingHashes, type Credentials } from './signing.ts'
import { SignIn } from './signIn.tsx'
import { pages, type PageId } from './pages.ts'

const base = import.meta.env.BASE_URL

function pageFromLocation(): PageId {
  const name = location.pathname.startsWith(base) ? location.pathname.slice(base.length).split('/')[0] : ''
  return (pages.find((page) => page.id === name)?.id ?? 'keys') as PageId
}

/** The console: sign-in, then the pages this key may use (by /Api/Read/List), one at a time. */
export function App() {
  const [api, setApi] = useState<Api | null>(null)
  const [page, setPage] = useState<PageId>(pageFromLocation)
  const [signInError, setSignInError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const [dayCodeRequest, setDayCodeRequest] = useState<DayCodeRequest | null>(null)

  const askDayCode = (reason: string) => new Promise<string | null>((resolve) => {
    setDayCodeRequest({ reason, answer: (code) => { setDayCodeRequest(null); resolve(code) } })
  })

  async function signIn(credentials: Credentials, remembered = false) {
    setBusy(true)
    setSignInError(null)
    try {
      const basePath = await loadBasePath()
      // A key bound to another HMAC method (Require_Hash, D4) fails SHA-256 with "does not match": the others are tried once each.
      const methods = credentials.hash ? [credentials.hash] : signingHashes
      for (const [index, hash] of methods.entries()) {
        const candidate = new Api(basePath, { ...credentials, hash }, askDayCode)
        try {
          await candidate.loadOperations()
        } catch (error) {
          if (error instanceof ApiError && error.status === 401 && /does not match/.test(error.message) && index < methods.length - 1) continue
          throw error
        }
        storeCredentials({ ...credentials, hash })
        setApi(candidate)
        return
      }
    } catch (error) {
      if (remembered) forgetSession()
      const mismatch = error instanceof ApiError && error.status === 401 && /does not match/.test(error.message)
      // The day code is asked for (a key with DayPass 1) only once the key and secret are right.
      const dayCode = error instanceof ApiError && error.status === 401 && /day code/i.test(error.message)
      setSignInError(dayCode
        ? `${error.message} The key and secret are right: this key (DayPass 1) needs today's day code for every call, signing in too.`
        : mismatch && !credentials.hash
        // Every hash the browser has failed: a right secret of a key bound to md5 fails so too.
        ? `${error.message} Check the key and secret. If they are right, the key may be bound to md5 (Require_Hash 1), which the browser cannot sign (it has no HMAC-MD5); npm run call works with it.`
        : error instanceof ApiError && error.status === 401 ? `${error.message} Check the key and secret.`
        // The menu is built from the operation list: a key that may not read it cannot use the console.
        : error instanceof ApiError && error.status === 403 && /\/Api\/Read\/List/i.test(error.message)
          ? `${error.message} The console needs a key whose groups include "Operation list reader" (GET /Api/Read/List); this key still works with npm run call.`
          // The operation list is the api plugin's: a service that runs without it answers 404.
          : error instanceof ApiError && error.status === 404
            ? 'This service does not run the api plugin, which the console needs for its operation list (GET /Api/Read/List): add api to the enabled plugins (PLUGINS) and restart it.'
            : errorText(error))
    } finally {
      setBusy(false)
    }
  }

  useEffect(() => {
    const stored = storedCredentials()
    if (stored) void signIn(stored, true)
    const onPop = () => setPage(pageFromLocation())
    addEventListener('popstate', onPop)
    return () => removeEventListener('popstate', onPop)
  }, [])

  function open(id: PageId) {
    history.pushState(null, '', `${base}${id}`)
    setPage(id)
  }

  function signOut() {
    forgetSession()
    setApi(null)
    history.pushState(null, '', base)
  }

  const dialog = <DayCodeDialog request={dayCodeRequest} />
  if (!api) return <>{busy && storedCredentials() ? <main id="main"><p role="status">Signing in…</p></main> : <SignIn onSignIn={(credentials) => void signIn(credentials)} error={signInError} busy={busy} />}{dialog}</>

  const available = pages.filter((entry) => entry.needs.every(([method, path]) => api.may(method, path)))
  const current = available.find((entry) => entry.id === page) ?? available[0]
  const Page = current?.component
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header>
        <span class="brand">keygate console</span>
        <nav aria-label="Pages">
          <ul>
            {available.map((entry) => (
              <li key={entry.id}>
                <a href={`${base}${entry.id}`} aria-current={entry.id === current?.id ? 'page' : undefined}
                  onClick={(event) => { event.preventDefault(); open(entry.id) }}>{entry.title}</a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span>Signed in as <code>{api.apiKey}</code></span>
          <button type="button" class="secondary" onClick={signOut}>Sign out</button>
        </div>
      </header>
      <main id="main">
        {Page ? <Page key={current.id} api={api} /> : <p>This key may not call any operation the console shows.</p>}
      </main>
      {dialog}
    </>
  )
}
