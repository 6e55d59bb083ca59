import { useEffect, useRef, useState } from 'preact/hooks'

export interface DayCodeRequest {
  reason: string
  answer: (code: string | null) => void
}

/**
 * The day code (x-apitoday, D5), asked for when an operation needs it: a modal dialog
 * (focus stays inside, Escape cancels; then it returns to the control that opened it). The operator gets the code from
 * `npm run --silent admin -- daycode` or an authenticator app set up with `--uri`.
 */
export function DayCodeDialog({ request }: { request: DayCodeRequest | null }) {
  const dialog = useRef<HTMLDialogElement>(null)
  const [code, setCode] = useState('')
  // The control last focused outside the dialog: the button that opened it is disabled while
  // its call waits, which leaves the focus on the body, so the dialog's own return goes there.
  const lastFocused = useRef<HTMLElement | null>(null)
  const opener = useRef<HTMLElement | null>(null)
  useEffect(() => {
    const remember = (event: FocusEvent) => {
      if (event.target instanceof HTMLElement && !dialog.current?.contains(event.target)) lastFocused.current = event.target
    }
    document.addEventListener('focusin', remember)
    return () => document.removeEventListener('focusin', remember)
  }, [])
  useEffect(() => {
    const element = dialog.current
    if (!element) return
    if (request && !element.open) {
      setCode('')
      opener.current = lastFocused.current
      element.showModal()
    } else if (!request && element.open) {
      element.close()
      // Back to the opener once its call has let it go (it is enabled again when the call ends).
      const back = opener.current
      opener.current = null
      if (back?.isConnected) setTimeout(() => back.focus())
    }
  }, [request])
  function finish(value: string | null) {
    request?.answer(value)
  }
  return (
    <dialog ref={dialog} aria-labelledby="daycode-title" onCancel={(event) => { event.preventDefault(); finish(null) }}>
      <form method="dialog" onSubmit={(event) => { event.preventDefault(); finish(code.trim()) }}>
        <h2 id="daycode-title">Day code needed</h2>
        <p>{request?.reason}</p>
        <p>Ask the operator for today's code (<code>npm run --silent admin -- daycode</code>) or read it from your authenticator app.</p>
        <label class="field">
          <span>Day code (8 digits)</span>
          <input name="daycode" inputMode="numeric" autoComplete="one-time-code" pattern="[0-9]{8}" required value={code} onInput={(event) => setCode(event.currentTarget.value)} />
        </label>
        <div class="actions">
          <button type="submit">Continue</button>
          <button type="button" class="secondary" onClick={() => finish(null)}>Cancel</button>
        </div>
      </form>
    </dialog>
  )
}
