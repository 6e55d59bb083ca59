import type { Api, Operation } from '../api.ts'
import { ErrorText, PageTitle, TableFrame, useLoad } from '../components.tsx'

interface AclEntry { Id: number; Path: string; Display_Name: string; Is_Public: number; Require_Https: number; Require_Hash: number }
interface Group { Id: number; Display_Name: string; Paths: string[] }

const hashNames = ['any', 'md5', 'sha1', 'sha256', 'sha384', 'sha512']

/** Access: your groups, the ACL entries that apply to your key, and the operations it may call. */
export function AccessPage({ api }: { api: Api }) {
  const acl = useLoad(() => api.call<AclEntry[]>('GET', '/Api/Read/Acl'))
  const groups = useLoad(() => api.may('POST', '/account/read/group') ? api.call<Group[]>('POST', '/account/read/group', {}) : Promise.resolve(null))
  const operations = useLoad(() => api.call<Operation[]>('GET', '/Api/Read/List'))
  return (
    <>
      <PageTitle>Access</PageTitle>
      <ErrorText error={acl.error ?? groups.error ?? operations.error} />
      {groups.data && (
        <section aria-labelledby="groups-title">
          <h2 id="groups-title">Your groups</h2>
          <TableFrame label="Groups table">
            <thead><tr><th scope="col">Id</th><th scope="col">Group</th><th scope="col">ACL paths</th></tr></thead>
            <tbody>{groups.data.map((group) => <tr key={group.Id}><td>{group.Id}</td><th scope="row">{group.Display_Name}</th><td>{group.Paths.join(', ')}</td></tr>)}</tbody>
          </TableFrame>
        </section>
      )}
      <section aria-labelledby="acl-title">
        <h2 id="acl-title">ACL entries</h2>
        <TableFrame label="ACL entries table">
          <thead><tr><th scope="col">Id</th><th scope="col">Path</th><th scope="col">What it allows</th><th scope="col">Public</th><th scope="col">HTTPS</th><th scope="col">Hash</th></tr></thead>
          <tbody>
            {(acl.data ?? []).map((entry) => (
              <tr key={entry.Id}><td>{entry.Id}</td><th scope="row"><code>{entry.Path}</code></th><td>{entry.Display_Name}</td><td>{entry.Is_Public ? 'yes' : 'no'}</td><td>{entry.Require_Https ? 'required' : 'optional'}</td><td>{hashNames[entry.Require_Hash] ?? entry.Require_Hash}</td></tr>
            ))}
          </tbody>
        </TableFrame>
      </section>
      <section aria-labelledby="operations-title">
        <h2 id="operations-title">Operations this key may call</h2>
        <TableFrame label="Operations">
          <thead><tr><th scope="col">Operation</th><th scope="col">What it does</th><th scope="col">Needs</th><th scope="col">Cached</th></tr></thead>
          <tbody>
            {(operations.data ?? []).map((operation) => (
              <tr key={`${operation.Method} ${operation.Path}`}><th scope="row"><code>{operation.Method} {operation.Path}</code></th><td>{operation.Display_Name ?? ''}</td><td>{operation.Needs.includes('today') ? 'day code' : 'signature'}</td><td>{operation.Cached ? `${operation.Cached} s` : 'no'}</td></tr>
            ))}
          </tbody>
        </TableFrame>
      </section>
    </>
  )
}
