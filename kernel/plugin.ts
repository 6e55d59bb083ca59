/**
 * The plugin contract. A plugin is a folder (`plugins/<name>/`, or any folder or npm
 * package named in config `plugins`) whose index exports a `Plugin`: its migrations,
 * the default ACL groups it brings, and a `setup` that receives the kernel's services
 * and returns its routes. Plugins import only `kernel/sdk.ts`, talk to the kernel only
 * through `KernelServices`, and never to each other.
 */
import type { IncomingHttpHeaders } from 'node:http'
import type { Kysely } from 'kysely'
import type { Config } from './boot/config.ts'
import type { Dialect } from './storage/database.ts'
import type { RateWindow } from './limits/maxHits.ts'
import type { AclMatcher } from './auth/aclPath.ts'
import type { HashMethod } from './auth/signature.ts'
import type { KeyAdministration } from './auth/keyAdministration.ts'
import type { LiveServer } from './cluster/nodeRegistry.ts'
import type { TenantServices } from './tenants/tenants.ts'
import type { UsageCount, UsageQuery, UsageScope } from './callLog/usage.ts'
import type { EventHandler, KernelEvent } from './events/events.ts'
import type { Logger } from './observe/logger.ts'

export interface Migration {
  /** `dialect` says which engine runs it, for the few column types that differ. */
  up(db: Kysely<any>, dialect: Dialect): Promise<void>
}
/** Versioned migrations, applied in name order once each; append, never edit. */
export type Migrations = Record<string, Migration>

export type ResponseFormat = 'json' | 'xml' | 'csv'

/** An ACL entry (interface 2.2) as the kernel holds it. */
export interface AclEntry {
  id: number
  path: string
  displayName: string
  isPublic: number
  requireHttps: number
  requireHash: HashMethod
  matches: AclMatcher
}

/** The authenticated key making a call. Secrets never appear here. */
export interface CallerKey {
  id: number
  apiKey: string
  displayName: string
  parent: number
  custno: number
  startDate: number | null
  endDate: number | null
  dayPass: number
  requireHttps: number
  allowHours: number | null
  responseFormat: ResponseFormat
  logLevel: number
  logRaw: number
  maxHits: string | null
  rateWindows: readonly RateWindow[]
  requireHash: HashMethod | null
  createdBy: number | null
  /** Shared between keys with the same groups: read-only. */
  groupIds: readonly number[]
  acl: readonly AclEntry[]
  /** True only for a call without credentials to an Is_Public path: a tenant that owns nothing. */
  anonymous: boolean
  /** The key has Credits (a count, not unlimited): each call spends from it in the database (issue 16). */
  metered: boolean
  /** The tenant-wide MaxHits that bound this key's calls: its own tenant's and its parent's (issue 16). */
  tenantQuotas: readonly TenantQuota[]
}

/** One tenant's MaxHits windows, counted for all of its keys together. */
export interface TenantQuota {
  parent: number
  /** 0: the whole parent, every customer of it together. */
  custno: number
  windows: readonly RateWindow[]
}

/** What a handler sees of one call. */
export interface Call<Body = unknown, Query = Record<string, string>> {
  readonly requestId: number
  readonly caller: CallerKey
  /** The parsed, schema-checked JSON body (undefined when the route takes none). */
  readonly body: Body
  /** Query parameters, schema-checked and coerced when the route declares a query schema. */
  readonly query: Query
  /** The ACL entry that allowed this call: of several matching entries, their strictest rule under the lowest id. */
  readonly acl: AclEntry | null
  readonly headers: IncomingHttpHeaders
  readonly format: ResponseFormat
  /** Extra response headers (e.g. X-Total-Count); the kernel adds its own. */
  setHeader(name: string, value: string): void
}

export interface CachePolicy<Body, Query> {
  ttlSeconds: number
  /**
   * The partition an answer belongs to; `kernel.cache.invalidate(partition)` drops all
   * of it at once. Query string, body and format are part of the cache key anyway.
   */
  partition(call: Call<Body, Query>): string
}

export interface Route<Body = any, Query = any> {
  method: 'GET' | 'POST'
  /** The canonical path after the base path, e.g. `/Api/Read/Acl`. ACLs match this. */
  path: string
  /**
   * The operation's name in /Api/Read/List and the OpenAPI document, for a route its
   * default groups cover only with a wildcard entry (`/People/Read/*`); an entry naming
   * exactly this path names it instead.
   */
  summary?: string
  /** The day code (x-apitoday) is required on this route for every key (D5). */
  dayCode?: boolean
  /**
   * The route changes state: a second use of a signature is refused (replay) and an
   * `Idempotency-Key` header is honoured. Default: POST routes whose path has no
   * `/Read/` segment (the interface's naming: `/Api/Create/Key`, `/People/Update/...`).
   */
  writes?: boolean
  /**
   * Who may call it, beyond the ACL (a rule the ACL cannot say, read from the database):
   * throws (403) to refuse. Judged before the query's and body's schemas, so a caller
   * refused learns nothing from its input's checks.
   */
  permit?: (caller: CallerKey) => Promise<void>
  /** JSON schema of the body; a route without one takes no body. */
  body?: object
  /**
   * The handler refuses a call without a body although the schema requires no one field
   * (an edit names its key by KeyId or ApiKey): OpenAPI then marks the body required.
   * Default: the schema requires a field.
   */
  bodyRequired?: boolean
  /** Largest body in bytes this route takes, when it needs more (or less) than config `bodyLimit`. */
  bodyLimit?: number
  /**
   * JSON schema of the query parameters (values arrive as strings and are coerced). A route
   * without one takes no parameter but `format`: any other is 400 `<name> is not a known parameter.`
   */
  query?: object
  cache?: CachePolicy<Body, Query>
  /**
   * Root element of XML answers, and the element of each item when the answer is a list.
   * `list`: the field of a wrapped list answer (e.g. `People` beside Total and Page) whose
   * records become one `item` element each, directly inside the root.
   */
  xml: { root: string; item?: string; list?: string }
  /**
   * How an answer is reshaped for XML when its JSON shape cannot be (member names that
   * are no XML element names, such as `1Sec`). The call log keeps the JSON shape.
   */
  xmlValue?: (result: any, call: Call<Body, Query>) => unknown
  /** How an answer becomes CSV rows when it is not already a list of records (a JsonText answer arrives as its value). */
  csv?: (result: any, call: Call<Body, Query>) => unknown[]
  /**
   * The content type of a route whose handler answers a `RawAnswer` (a page, a feed, a
   * document) instead of a value encoded as json/xml/csv; shown in the route list and
   * the OpenAPI document.
   */
  rawContentType?: string
  /** The route's answers carry an ETag and it answers If-None-Match with 304 (the OpenAPI document lists the 304). */
  etag?: boolean
  /** The CSV header of a record, so an answer with no records still has its header row. */
  csvColumns?: readonly string[]
  /**
   * JSON schema of the answer as the json format sends it (of a raw answer's own content,
   * where that is JSON): the OpenAPI document's 200 schema, so a client sees the fields it
   * gets, not only what it sends. Documentation only: answers are never checked against
   * it (that would cost every call); a test holds a plugin's schemas to its answers.
   */
  answer?: object
  /**
   * Headers a 200 answer of this route carries beyond the kernel's own (x-RequestID, the
   * RateLimit fields, X-Cache, Idempotent-Replayed): e.g. a listing's X-Total-Count, a
   * photo's ETag. Documentation only, for the OpenAPI document (D15): the handler sets them.
   */
  answerHeaders?: Readonly<Record<string, AnswerHeader>>
  /** The answer: a value to encode, a `RawAnswer` (bytes of their own type) or a `JsonText` (JSON already as text). */
  handler(call: Call<Body, Query>): unknown | Promise<unknown>
  /** Credits a call spends from a key that has Credits (issue 16); default 1, 0 = free. */
  cost?: number
}

/**
 * The admin default group (D9, D14): the group that allows key creation. The keys
 * plugin brings it; another plugin puts a route only admins may call into it by
 * declaring a default group of this name (its paths join the group, see
 * kernel/boot/bootstrap.ts). No key may assign it, so no path in it is ever handed on.
 */
export const adminGroupName = 'Key administration'

/**
 * A default group a plugin brings: created at first start (and when the plugin is
 * enabled later). Its name must be its own: a name another group already has stops the
 * start, except `adminGroupName`, whose group gets this plugin's paths added instead.
 */
export interface DefaultGroup {
  name: string
  paths: { path: string; displayName: string; isPublic?: number; requireHttps?: number; requireHash?: HashMethod }[]
  /**
   * Besides the root admin key, every key that holds the group of this name when this
   * group is made gets it too: on an upgrade, routes meant for every key administrator
   * (`adminGroupName`) reach the tenant administrators made before them, and no one else.
   */
  alsoHeldBy?: string
}

export interface LogRecord {
  RequestTime: string
  Http_Host: string | null
  Server_Name: string | null
  Server_Addr: string | null
  Server_Port: number | null
  Remote_Addr: string | null
  Request_Scheme: string | null
  Request_Method: string
  Api_Acl: number | null
  Api_Function: string
  Request_Url: string | null
  Http_User_Agent: string | null
  Raw_Request: string | null
  Response_Code: number
  Rsponse: unknown
  Response_Format: string | null
  Seconds: number
  Bandwidth: number
  /** Which secret signed the call: 'current', 'previous' (a rotation's overlap), null without a key (issue 16). */
  Secret: string | null
}

export interface WindowStatus {
  window: RateWindow
  remaining: number
  resetAt: number
}

/** A tenant quota's windows now (GET /Api/Read/Limits). */
export interface TenantWindowStatus {
  parent: number
  custno: number
  windows: WindowStatus[]
}

/** A key's credits now (issue 16): calls left (null = unlimited), its Refill and the next refill time. */
export interface CreditStatus {
  credits: number | null
  refill: { Amount: number; Every: '1Day' | '1Mon' } | null
  refillAt: number | null
}

/**
 * A plugin's database handle: no table of the kernel's is on it (keys, groups, ACL and
 * the log are the kernel's, reached through its services); a plugin types its own
 * tables with `kernel.db.withTables<MyTables>()`.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export type PluginDatabase = Kysely<{}>

/** What the kernel lends its plugins. */
export interface KernelServices {
  readonly config: Config
  /** The service's own version (package.json), as `keygate --version` prints it. */
  readonly version: string
  /**
   * The names of the plugins config `plugins` enables, in its order (an entry may be a
   * folder or a package; this is the plugin's own name). The console, which `console.enabled`
   * adds, and plugins given to the kernel directly are not listed.
   */
  readonly plugins: readonly string[]
  readonly dialect: Dialect
  readonly db: PluginDatabase
  readonly clock: () => number
  readonly cache: {
    invalidate(partition: string): void
    /** The partition of everything cached for one key; dropped when that key changes. */
    keyPartition(keyId: number): string
    /**
     * A value kept in `partition` until it is invalidated or `ttlSeconds` pass, computed
     * on first use (e.g. a listing's Total, shared by all its pages).
     */
    remember<T>(partition: string, name: string, ttlSeconds: number, compute: () => Promise<T>): Promise<T>
  }
  /** Keys, their groups and ACL: created, edited and read only through here; caches follow by themselves. */
  readonly keys: KeyAdministration
  readonly callLog: {
    /** A call's record, including one still waiting in the write queue; keyId must match. */
    find(requestId: number, keyId: number): Promise<(LogRecord & { Id: number }) | undefined>
    history(keyId: number, options: { page: number; size: number; from?: number; to?: number; apiFunction?: string }): Promise<{ total: number; records: Record<string, unknown>[] }>
    /** Calls per time bucket (`stepMs`, from..to, at most 31 days) and status, of one key or every key of a tenant. */
    usage(scope: UsageScope, query: UsageQuery): Promise<UsageCount[]>
  }
  readonly rateLimits: {
    status(caller: CallerKey): Promise<WindowStatus[]>
    /** The caller's tenant quotas (its own tenant's, then its parent's), without consuming. */
    tenantStatus(caller: CallerKey): Promise<TenantWindowStatus[]>
  }
  /** A key's credits, read from the database (issue 16). */
  readonly credits: {
    status(keyId: number): Promise<CreditStatus>
  }
  /** The service's processes on this database (D16): those seen within `nodes.expireMs`, by node id. */
  readonly servers: {
    live(): Promise<LiveServer[]>
  }
  /**
   * Every mounted route of every enabled plugin, built once on first use. Call it from a
   * handler, not from `setup` (plugins set up one after another).
   */
  routes(): readonly MountedRouteInfo[]
  /** The change history of every enabled plugin, merged, newest first (D15). */
  history(): readonly HistoryEntry[]
  /** Tenant entitlements and usage, the room check a create runs in its transaction, time zones, display players (D14). */
  readonly tenants: TenantServices
  /**
   * Events (issue 17): `subscribe` a handler that runs inside the transaction of the
   * change that causes each event (write an outbox row there; answer false when you
   * wrote nothing because nobody wants it, so a once-only warning is offered again
   * later); `emit` one of your own inside your change's transaction.
   */
  readonly events: {
    subscribe(handler: EventHandler): void
    emit(trx: Kysely<any>, event: KernelEvent): Promise<void>
  }
  /**
   * The audit trail (issue 16): `record` one administrative change a call made, inside
   * the change's own transaction (no change without its record, none without its change).
   * `before`/`after` hold the changed fields as the API names them; never a secret.
   */
  readonly audit: {
    record(trx: Kysely<any>, call: Call<any, any>, change: { action: string; before?: Record<string, unknown> | null; after?: Record<string, unknown> | null }): Promise<void>
  }
  /** Seals a secret a plugin keeps (AES-256-GCM under the master key) and opens it; `context` binds it to its record. */
  readonly secrets: {
    seal(plaintext: string, context: string): string
    open(sealed: string, context: string): string
  }
  /** Work to stop when the kernel closes (a background loop), before the database closes. */
  onClose(stop: () => Promise<void>): void
  /**
   * Work to start once the kernel serves (a background loop that acts for the service,
   * such as a sender): never in an operator CLI run, whose kernel serves nothing.
   */
  onServe(start: () => void): void
  /**
   * The service log (pino JSON lines), bound with `{ plugin: name }` for the plugin it is
   * given to: for what happens off any call (a background loop's failure). Secrets are
   * redacted as in the kernel's own lines.
   */
  readonly log: Logger
}

/**
 * A column where a plugin keeps values sealed with `kernel.secrets.seal`, each with the
 * context `contextPrefix` + the row's `idColumn`. `admin master-key rotate` re-seals
 * them with the API secrets, in the same transaction; a value it does not know of would
 * no longer open after a rotation.
 */
export interface SealedColumn {
  table: string
  idColumn: string
  column: string
  contextPrefix: string
}

export interface Plugin {
  name: string
  migrations?: Migrations
  defaultGroups?: DefaultGroup[]
  /** Columns of the plugin's tables that hold sealed secrets (see SealedColumn). */
  sealedColumns?: readonly SealedColumn[]
  setup(kernel: KernelServices): Route[] | Promise<Route[]>
  close?(): Promise<void>
  /**
   * The plugin's change history (D15), newest first. A plugin folder keeps it in
   * `history.json` beside its index, which the loader reads; a plugin given as an
   * object (tests, embedders) may carry it here.
   */
  history?: readonly HistoryEntry[]
  /**
   * Files the plugin serves as they are (a browser app), outside the base path and
   * without credentials; null when its config turns them off. Asked once at start.
   */
  staticFiles?(config: Config): StaticFiles | null
}

/** A folder of built files served under `mount` (kernel/http/staticFiles.ts). */
export interface StaticFiles {
  /** Outside the base path, with both slashes: `/console/`. The path without its last slash redirects here. */
  mount: string
  /** Absolute path of the folder; its index.html answers the mount and every unknown page below it. */
  folder: string
  /** The text of the 503 while the folder has no index.html (not built yet). */
  missing: string
  /** Small files made at start beside the built ones (name -> text), e.g. settings the app reads. */
  generated?: Record<string, string>
}

/** Identity helper that gives route handlers their types. */
export function defineRoute<Body = undefined, Query = Record<string, string>>(route: Route<Body, Query>): Route<Body, Query> {
  return route
}

/** One change of the interface (D15): adding a route, removing one, changing an answer's fields. */
export interface HistoryEntry {
  /** YYYY-MM-DD, the day the change landed. */
  Date: string
  Version: string
  Kind: 'added' | 'modified' | 'removed'
  Breaking: 0 | 1
  /** Method and canonical path, e.g. "POST /Api/Create/Key". */
  Operation: string
  Description: string
}

/** One response header as the OpenAPI document describes it (Route.answerHeaders). */
export interface AnswerHeader {
  description: string
  schema: object
}

/** A mounted route as `kernel.routes()` describes it. */
export interface MountedRouteInfo {
  plugin: string
  method: 'GET' | 'POST'
  path: string
  dayCode: boolean
  /** Seconds an answer is cached; 0 = not cached. */
  cacheSeconds: number
  body: object | null
  query: object | null
  /** JSON schema of the json answer (Route.answer); null when the route declares none. */
  answer: object | null
  /** Set when the route answers one fixed content type instead of json/xml/csv. */
  rawContentType: string | null
  /** It answers If-None-Match with 304 (Route.etag). */
  etag: boolean
  /** Headers its 200 answers carry beyond the kernel's own (Route.answerHeaders); {} when none. */
  answerHeaders: Readonly<Record<string, AnswerHeader>>
  /** It changes state: replays are refused and `Idempotency-Key` is honoured (Route.writes). */
  writes: boolean
  /** A call must send a body (Route.bodyRequired, or a field the schema requires). */
  bodyRequired: boolean
  /** The display name its plugin's default groups give this path, if any. */
  summary: string | null
  /** A default group of its plugin makes the path Is_Public (callable without credentials). */
  publicByDefault: boolean
}
