import { useState } from 'preact/hooks'
import type { Api } from '../api.ts'
import { ErrorText, PageTitle, TableFrame, useLoad } from '../components.tsx'

interface AuditAnswer { Total: number; Page: number; Records: { Id: number; At: string; Who: number | 'operator'; Action: string; KeyId: number | null; Before: unknown; After: unknown; RequestId: number | null }[] }

const short = (value: unknown) => (value === null || value === undefined ? '—' : JSON.stringify(value))

/** Audit: your tenant's trail of key, group and ACL changes, newest first. */
export function AuditPage({ api }: { api: Api }) {
  const [page, setPage] = useState(1)
  const audit = useLoad(() => api.call<AuditAnswer>('POST', '/Api/Read/Audit', { page }), [page])
  return (
    <>
      <PageTitle>Audit</PageTitle>
      <ErrorText error={audit.error} />
      {audit.data && (
        <TableFrame label="Audit trail">
          <caption>{audit.data.Total} changes, page {audit.data.Page}</caption>
          <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Key</th><th scope="col">Before</th><th scope="col">After</th></tr></thead>
          <tbody>
            {audit.data.Records.map((record) => (
              <tr key={record.Id}><td>{record.At}</td><td>{record.Who === 'operator' ? 'operator' : `key ${record.Who}`}</td><td>{record.Action}</td><td>{record.KeyId ?? '—'}</td><td class="json">{short(record.Before)}</td><td class="json">{short(record.After)}</td></tr>
            ))}
          </tbody>
        </TableFrame>
      )}
      <div class="actions">
        <button type="button" class="secondary" disabled={page <= 1} onClick={() => setPage(page - 1)}>Previous page</button>
        <button type="button" class="secondary" disabled={!audit.data || page * 100 >= audit.data.Total} onClick={() => setPage(page + 1)}>Next page</button>
      </div>
    </>
  )
}
