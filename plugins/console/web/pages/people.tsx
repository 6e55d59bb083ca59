import { useEffect, useState } from 'preact/hooks'
import { ApiError, type Api } from '../api.ts'
import { ErrorText, Field, PageTitle, Pager, TableFrame, useAction, useLoad } from '../components.tsx'
import { fileRejection, planCsv, type Rejection } from '../csvBatches.ts'

interface Person { Id: number; Source_Id: string | null; FirstName: string | null; LastName: string | null; Email: string | null; Dept: string | null; Title: string | null; Location: string | null; Photo: string | null; TermDate: string | null }
interface Listing { Total: number; Page: string; Sort: string; People: Person[] | string }
interface TodayPerson { Id: number; FirstName: string | null; LastName: string | null; Occasion: 'Birthday' | 'Anniversary'; Years?: number }
interface ImportBatch { Added: number; Changed: number; Unchanged: number; Rejected: number; Rejections: Rejection[] }

const name = (person: { FirstName: string | null; LastName: string | null }) => [person.FirstName, person.LastName].filter(Boolean).join(' ')
const people = (listing: Listing | null) => (listing && Array.isArray(listing.People) ? listing.People : [])

/** Rows per importmass call: small enough for a visible progress, large enough to be quick. */
const batchRows = 250

function readAsDataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader()
    reader.onload = () => resolve(String(reader.result))
    reader.onerror = () => reject(new Error('Error: The file could not be read.'))
    reader.readAsDataURL(file)
  })
}

/** People per page of the missing-photo list: each has an upload button. */
const missingPageSize = 20

function MissingPhotos({ api, onUploaded }: { api: Api; onUploaded: () => void }) {
  const [page, setPage] = useState(1)
  const missing = useLoad(() => api.call<Listing>('GET', `/People/Read/Missing?page=${page}&size=${missingPageSize}`), [page])
  // A key that may read people but not change them sees who is missing a photo, with no upload it would be refused.
  const mayUpload = api.may('POST', '/People/Update/OnePhoto')
  const upload = useAction()
  const [status, setStatus] = useState('')
  const total = missing.data?.Total ?? 0
  const pages = Math.max(1, Math.ceil(total / missingPageSize))
  // The last page's last person got a photo (or was removed): that page is gone, show the one now last.
  useEffect(() => {
    if (missing.data && page > pages) setPage(pages)
  }, [missing.data])
  const send = (person: Person, file: File | undefined) => file && upload.run(async () => {
    await api.call('POST', '/People/Update/OnePhoto', { Id: person.Id, Image: await readAsDataUrl(file) })
    setStatus(`Photo of ${name(person)} uploaded.`)
    missing.reload()
    // The directory below shows Photo too: reload it, or it still says "no" for this person.
    onUploaded()
  })
  return (
    <section aria-labelledby="missing-title">
      <h2 id="missing-title">Missing photos ({missing.data?.Total ?? '…'})</h2>
      <ErrorText error={missing.error ?? upload.error} />
      <p role="status" class="status">{status}</p>
      {total === 0 ? (missing.data && <p>Everyone has a photo.</p>) : (
        <>
          {Array.isArray(missing.data?.People) && <p>Page {missing.data.Page}</p>}
          <ul class="missing">
            {people(missing.data).map((person) => (
              <li key={person.Id}>
                <span>{name(person)} {person.Dept ? <small>({person.Dept})</small> : null}</span>
                {mayUpload && (
                  <label class="file-button">
                    <span>Upload photo of {name(person)}</span>
                    <input type="file" accept="image/png,image/jpeg,image/webp" onChange={(event) => void send(person, event.currentTarget.files?.[0])} />
                  </label>
                )}
              </li>
            ))}
          </ul>
          <Pager page={page} pages={pages} onPage={setPage} of="missing photos" />
        </>
      )}
    </section>
  )
}

function PeopleList({ api, round, photos }: { api: Api; round: number; photos: number }) {
  const [query, setQuery] = useState({ filter: '', sort: 'LastName,FirstName' })
  const [applied, setApplied] = useState(query)
  const [page, setPage] = useState(1)
  const listing = useLoad(() => api.call<Listing>('POST', '/people/read/list', { page, size: 50, sort: applied.sort, ...(applied.filter.trim() ? { filter: applied.filter.trim() } : {}) }), [applied, page, round, photos])
  const pages = Number(listing.data?.Page.split(' of ')[1] ?? 1)
  return (
    <section aria-labelledby="list-title">
      <h2 id="list-title">People</h2>
      <form class="toolbar" onSubmit={(event) => { event.preventDefault(); setPage(1); setApplied(query) }}>
        <Field label="Filter" hint="Field=value pairs joined by commas, e.g. Dept=Research,Location=HQ">
          <input name="filter" value={query.filter} onInput={(event) => setQuery({ ...query, filter: event.currentTarget.value })} />
        </Field>
        <Field label="Sort" hint="Field names, - for descending, e.g. -HireDate,LastName">
          <input name="sort" value={query.sort} onInput={(event) => setQuery({ ...query, sort: event.currentTarget.value })} />
        </Field>
        <button type="submit">Apply</button>
      </form>
      <ErrorText error={listing.error} />
      {listing.data && (
        <TableFrame label="People table">
          <caption>{listing.data.Total} people, page {listing.data.Page}</caption>
          <thead><tr><th scope="col">Name</th><th scope="col">Source_Id</th><th scope="col">Email</th><th scope="col">Dept</th><th scope="col">Title</th><th scope="col">Location</th><th scope="col">Photo</th></tr></thead>
          <tbody>
            {people(listing.data).map((person) => (
              <tr key={person.Id}><th scope="row">{name(person)}</th><td>{person.Source_Id}</td><td>{person.Email}</td><td>{person.Dept}</td><td>{person.Title}</td><td>{person.Location}</td><td>{person.Photo ? 'yes' : 'no'}</td></tr>
            ))}
          </tbody>
        </TableFrame>
      )}
      <Pager page={page} pages={pages} onPage={setPage} />
    </section>
  )
}

/**
 * CSV import: the file is cut into batches of whole rows (header repeated), sent with
 * importinit -> importmass per batch; the bar shows the rows sent, the report lists
 * every refused row with its line in the file. importterm only when asked: it
 * terminates everyone the file does not name.
 */
function CsvImport({ api, onDone }: { api: Api; onDone: () => void }) {
  const [file, setFile] = useState<File | null>(null)
  const [complete, setComplete] = useState(false)
  const [progress, setProgress] = useState<{ sent: number; total: number } | null>(null)
  const [report, setReport] = useState<{ added: number; changed: number; unchanged: number; rejections: ImportBatch['Rejections'] } | null>(null)
  const action = useAction()
  const start = (event: Event) => {
    event.preventDefault()
    if (!file) return
    void action.run(async () => {
      setReport(null)
      setProgress(null)
      // The whole file is read first: one the server would refuse whole is refused here, nothing sent.
      const plan = planCsv(await file.text(), batchRows)
      if ('error' in plan) throw new Error(plan.error)
      const total = plan.rows
      setProgress({ sent: 0, total })
      const { ImportId } = await api.call<{ ImportId: number }>('POST', '/people/update/importinit', {})
      const result = { added: 0, changed: 0, unchanged: 0, rejections: [] as ImportBatch['Rejections'] }
      let sent = 0
      for (const batch of plan.batches) {
        const answer = await api.call<ImportBatch>('POST', '/people/update/importmass', { ImportId, Csv: batch.text }).catch((error: unknown) => {
          // A batch refused whole names a row of the batch: the file's row is what the person can find.
          if (error instanceof ApiError) throw new ApiError(error.status, error.message.replace(/\brow (\d+)/g, (_, row: string) => `row ${Number(row) + batch.rowOffset}`))
          throw error
        })
        result.added += answer.Added
        result.changed += answer.Changed
        result.unchanged += answer.Unchanged
        // Rows count from the line after the batch's header: back to lines of the whole file.
        for (const rejection of answer.Rejections) result.rejections.push(fileRejection(rejection, batch))
        sent += batch.rows
        setProgress({ sent, total })
      }
      if (complete) await api.call('POST', '/people/update/importterm', { ImportId })
      // A batch may hold later rows (the repeats of a Source_Id): the report goes by the file's order.
      result.rejections.sort((a, b) => a.Row - b.Row)
      setReport(result)
      onDone()
    })
  }
  return (
    <section aria-labelledby="import-title">
      <h2 id="import-title">Import people from CSV</h2>
      <form class="panel" onSubmit={start}>
        <Field label="CSV file" hint="Header line with field names (Source_Id and LastName required), one person per line.">
          <input type="file" name="csv" accept=".csv,text/csv" required onChange={(event) => setFile(event.currentTarget.files?.[0] ?? null)} />
        </Field>
        <label class="check">
          <input type="checkbox" checked={complete} onChange={(event) => setComplete(event.currentTarget.checked)} />
          <span>This file is the complete list: terminate people it does not name</span>
        </label>
        <button type="submit" disabled={action.busy || !file}>Import</button>
      </form>
      {progress && (
        <div class="progress">
          <label for="import-progress">Rows sent: {progress.sent} of {progress.total}</label>
          <progress id="import-progress" max={progress.total} value={progress.sent} />
        </div>
      )}
      <ErrorText error={action.error} />
      {report && (
        <div class="panel" role="status" aria-live="polite">
          <p data-testid="import-summary">Import done: {report.added} added, {report.changed} changed, {report.unchanged} unchanged, {report.rejections.length} rejected.</p>
          {report.rejections.length > 0 && (
            <TableFrame label="Rejected rows">
              <caption>Rejected rows</caption>
              <thead><tr><th scope="col">Row</th><th scope="col">Source_Id</th><th scope="col">Reason</th></tr></thead>
              <tbody>{report.rejections.map((rejection) => <tr key={rejection.Row} class="rejected-row"><td>{rejection.Row}</td><td>{rejection.Source_Id ?? '—'}</td><td>{rejection.Reason}</td></tr>)}</tbody>
            </TableFrame>
          )}
        </div>
      )}
    </section>
  )
}

function Today({ api }: { api: Api }) {
  const today = useLoad(() => api.call<TodayPerson[] | { People: TodayPerson[] }>('GET', '/People/Read/Today'))
  const list = Array.isArray(today.data) ? today.data : (today.data?.People ?? [])
  return (
    <section aria-labelledby="today-title">
      <h2 id="today-title">Today</h2>
      <ErrorText error={today.error} />
      {list.length === 0 ? <p>No birthdays or anniversaries today.</p> : (
        <ul>{list.map((person) => <li key={`${person.Id}-${person.Occasion}`}>{name(person)}: {person.Occasion === 'Birthday' ? 'birthday' : `${person.Years} years with us`}</li>)}</ul>
      )}
    </section>
  )
}

/** People: missing photos with upload, the list with filter and sort, CSV import, today's occasions. */
export function PeoplePage({ api }: { api: Api }) {
  const [round, setRound] = useState(0)
  // Bumped by a photo upload: reloads the directory without remounting the missing list (its status line stays).
  const [photos, setPhotos] = useState(0)
  return (
    <>
      <PageTitle>People</PageTitle>
      {api.may('GET', '/People/Read/Missing') && <MissingPhotos key={round} api={api} onUploaded={() => setPhotos((count) => count + 1)} />}
      <PeopleList api={api} round={round} photos={photos} />
      {api.may('POST', '/people/update/importmass') && <CsvImport api={api} onDone={() => setRound(round + 1)} />}
      {api.may('GET', '/People/Read/Today') && <Today key={round} api={api} />}
    </>
  )
}
