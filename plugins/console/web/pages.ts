import type { FunctionComponent } from 'preact'
import type { Api } from './api.ts'
import { KeysPage } from './pages/keys.tsx'
import { AccessPage } from './pages/access.tsx'
import { UsagePage } from './pages/usage.tsx'
import { LogsPage } from './pages/logs.tsx'
import { PeoplePage } from './pages/people.tsx'
import { AuditPage } from './pages/audit.tsx'
import { WebhooksPage } from './pages/webhooks.tsx'

export type PageId = 'keys' | 'access' | 'usage' | 'logs' | 'people' | 'audit' | 'webhooks'

export interface PageEntry {
  id: PageId
  title: string
  /** A page is shown only when the key may call each of these (GET /Api/Read/List). */
  needs: [method: 'GET' | 'POST', path: string][]
  component: FunctionComponent<{ api: Api }>
}

export const pages: PageEntry[] = [
  { id: 'keys', title: 'Keys', needs: [['GET', '/Api/Read/Keys']], component: KeysPage },
  { id: 'access', title: 'Access', needs: [['GET', '/Api/Read/Acl']], component: AccessPage },
  { id: 'usage', title: 'Usage', needs: [['POST', '/Api/Read/Usage']], component: UsagePage },
  { id: 'logs', title: 'Logs', needs: [['POST', '/Api/Read/History']], component: LogsPage },
  { id: 'people', title: 'People', needs: [['POST', '/people/read/list']], component: PeoplePage },
  // The service answers the audit trail and webhooks only to a key that may create keys
  // (403 to any other, whatever its ACL): without that the page would show only the refusal.
  { id: 'audit', title: 'Audit', needs: [['POST', '/Api/Read/Audit'], ['POST', '/Api/Create/Key']], component: AuditPage },
  // The root key holds "Webhook administration" from the first start (bootstrap gives it every default group).
  { id: 'webhooks', title: 'Webhooks', needs: [['GET', '/Api/Read/Webhooks'], ['POST', '/Api/Create/Key']], component: WebhooksPage },
]
