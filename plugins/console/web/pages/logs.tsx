import { useState } from 'preact/hooks'
import type { Api } from '../api.ts'
import { ErrorText, Field, PageTitle, Pager, TableFrame, useAction, useFocusOnOpen, useLoad } from '../components.tsx'

interface HistoryAnswer { Total: number; Page: string; Calls: { Id: number; RequestTime: string; Request_Method: string; Api_Function: string; Response_Code: number; Seconds: number; Bandwidth: number }[] }

/** A date-time field's value read as UTC, the time the table shows (GMT), whatever the browser's zone. */
function utcDate(value: string): string {
  return new Date(`${value}Z`).toISOString()
}

/** Logs: your key's calls with filters, and one record in detail (POST /Api/Read/Log). */
export function LogsPage({ api }: { api: Api }) {
  const [filters, setFilters] = useState({ Function: '', From: '', To: '' })
  const [applied, setApplied] = useState(filters)
  const [page, setPage] = useState(1)
  const history = useLoad(() => api.call<HistoryAnswer>('POST', '/Api/Read/History', {
    page,
    size: 50,
    ...(applied.Function ? { Function: applied.Function } : {}),
    ...(applied.From ? { From: utcDate(applied.From) } : {}),
    ...(applied.To ? { To: utcDate(applied.To) } : {}),
  }), [applied, page])
  const [record, setRecord] = useState<Record<string, unknown> | null>(null)
  const detail = useAction()
  const recordPanel = useFocusOnOpen<HTMLElement>(record?.Id)
  const pages = Number(history.data?.Page.split(' of ')[1] ?? 1)
  // The record itself is another operation (POST /Api/Read/Log): a key that may list its calls but not read one gets no button it would be refused.
  const mayOpen = api.may('POST', '/Api/Read/Log')
  const open = (id: number) => detail.run(async () => setRecord({ Id: id, ...(await api.call<Record<string, unknown>>('POST', '/Api/Read/Log', { LogRequestId: id })) }))
  return (
    <>
      <PageTitle>Logs</PageTitle>
      <form class="toolbar" onSubmit={(event) => { event.preventDefault(); setPage(1); setApplied(filters) }}>
        <Field label="Operation path"><input name="Function" placeholder="/Api/Read/Acl" value={filters.Function} onInput={(event) => setFilters({ ...filters, Function: event.currentTarget.value })} /></Field>
        <Field label="From (UTC)"><input name="From" type="datetime-local" value={filters.From} onInput={(event) => setFilters({ ...filters, From: event.currentTarget.value })} /></Field>
        <Field label="To (UTC)"><input name="To" type="datetime-local" value={filters.To} onInput={(event) => setFilters({ ...filters, To: event.currentTarget.value })} /></Field>
        <button type="submit">Filter</button>
      </form>
      <ErrorText error={history.error ?? detail.error} />
      {history.data && (
        <TableFrame label="Calls">
          <caption>{history.data.Total} calls, page {history.data.Page}</caption>
          <thead><tr><th scope="col">Request id</th><th scope="col">Time</th><th scope="col">Operation</th><th scope="col">Status</th><th scope="col">Seconds</th><th scope="col">Bytes</th></tr></thead>
          <tbody>
            {history.data.Calls.map((call) => (
              <tr key={call.Id}>
                <td>{mayOpen ? <button type="button" class="link" aria-label={`Details of call ${call.Id}`} onClick={() => void open(call.Id)}>{call.Id}</button> : call.Id}</td>
                <td>{call.RequestTime}</td><td><code>{call.Request_Method} {call.Api_Function}</code></td><td>{call.Response_Code}</td><td>{call.Seconds}</td><td>{call.Bandwidth}</td>
              </tr>
            ))}
          </tbody>
        </TableFrame>
      )}
      <Pager page={page} pages={pages} onPage={setPage} />
      {record && (
        <section class="panel" ref={recordPanel} aria-labelledby="record-title">
          <h2 id="record-title" tabIndex={-1}>Call {String(record.Id)}</h2>
          <dl class="record">
            {Object.entries(record).map(([name, value]) => [<dt key={`${name}-t`}>{name}</dt>, <dd key={`${name}-d`}>{value === null ? '—' : typeof value === 'object' ? <pre>{JSON.stringify(value, null, 2)}</pre> : String(value)}</dd>])}
          </dl>
          <button type="button" class="secondary" onClick={() => setRecord(null)}>Close</button>
        </section>
      )}
    </>
  )
}
