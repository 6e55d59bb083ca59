/**
 * keygate's public surface for plugin authors: the one module a plugin imports from
 * the kernel (`keygate/sdk` from outside this repository). Everything a plugin needs is
 * here: the contract types, error factories, date and MaxHits helpers, schema checks
 * and the portable table helpers. What is not exported here is the kernel's own and
 * may change; test/plugin-surface.test.ts fails when a plugin reaches past this file.
 */
export type {
  AclEntry,
  CachePolicy,
  Call,
  CallerKey,
  DefaultGroup,
  HistoryEntry,
  AnswerHeader,
  KernelServices,
  LogRecord,
  Migration,
  Migrations,
  MountedRouteInfo,
  Plugin,
  PluginDatabase,
  ResponseFormat,
  Route,
  SealedColumn,
  StaticFiles,
  WindowStatus,
} from './plugin.ts'
export { adminGroupName, defineRoute } from './plugin.ts'

// Errors: throw these from a handler; the kernel answers `status` + `Error: ...` (D6).
export { ApiError, badRequest, forbidden, notFound, unauthorized, type ErrorCode } from './http/errors.ts'

// Dates: answers carry HTTP-dates; inputs accept HTTP-date or RFC 3339 (D9).
export { httpDate, parseInputDate, parseInputDateUntil } from './auth/apiDate.ts'

// Audit records (kernel.audit.record): the fields an edit changed, each side with its own value.
export { changedFields } from './audit/auditTrail.ts'

// Headers a paged listing's answer carries (D12: Total and Page travel in headers too), for Route.answerHeaders.
export { pagedListHeaders } from './http/answerHeaders.ts'

// Conditional requests: If-None-Match against an answer's ETag (a 304 is a RawAnswer with status 304).
export { etagMatches } from './http/etag.ts'

// MaxHits (D7): the one parser of the rate-limit grammar.
export { MaxHitsError, formatMaxHits, parseMaxHits, type RateWindow } from './limits/maxHits.ts'

// Credits (issue 16): a key's count as it stands now (a due refill included) and the refill schedule.
export { creditState, nextRefillAt, type CreditState, type Refill, type RefillEvery } from './limits/credits.ts'
export type { CreditStatus, TenantQuota, TenantWindowStatus } from './plugin.ts'

// ACL paths: `*` as the last segment covers that level and every deeper one.
export { compileAclPath, type AclMatcher } from './auth/aclPath.ts'

// Keys, groups and ACL belong to the kernel; plugins change them through `kernel.keys`.
export type { GroupRecord, IssuedKey, KeyAdministration, KeyChanges, KeyFields, KeyRecord } from './auth/keyAdministration.ts'

// The service's live processes (D16), as `kernel.servers.live()` lists them.
export type { LiveServer } from './cluster/nodeRegistry.ts'

// Input checks with the kernel's own schema layer, and its 400 text.
export { schemaCheck } from './http/schemas.ts'
export { describeSchemaError } from './http/schemaErrors.ts'
// Names (a key's Display_Name, ...): the one rule the API and the operator CLI both keep.
export { nameMaxLength, nameProblem, oneLineProblem } from './http/nameRule.ts'

// Answer schemas (Route.answer, shown in the OpenAPI document): a record whose every field is always there, and a list of them.
export { recordListSchema, recordSchema } from './http/answerSchemas.ts'

// The call log summed per time bucket and status (`kernel.callLog.usage`).
export type { UsageCount, UsageQuery, UsageScope } from './callLog/usage.ts'

// Tenants (D14): entitlements, usage counters, time zones and display players; `kernel.tenants`.
export type { Addition, TenantLicense, TenantServices, TenantUsage } from './tenants/tenants.ts'
export type { Entitlement, LimitedKind, TenantScope } from './tenants/entitlements.ts'
export type { UsageCounter } from './tenants/usage.ts'
export type { PlayerRecord } from './tenants/players.ts'
export { calendarDayAt, isTimeZone, type CalendarDay } from './tenants/timeZone.ts'

// An answer of its own content type and status (a page, a feed, an image, a 304), sent as it is instead of json/xml/csv.
export { RawAnswer } from './http/rawAnswer.ts'
export { JsonText, type JsonPiece } from './http/jsonText.ts'

// Events (issue 17): `kernel.events.subscribe/emit`, inside the transaction of the change.
export type { EventHandler, EventType, KernelEvent } from './events/events.ts'

// IP addresses and CIDR ranges as config lists them (webhooks.allowAddresses).
export { parseAddressRange, type AddressRange } from './boot/addressRange.ts'

// `kernel.log`: the service log, a pino logger bound to the plugin. errorReporter: a
// background job's error report that says a database outage once per 5 s, as the kernel does.
export { errorReporter, type Logger } from './observe/logger.ts'

// Kysely, the query builder of `kernel.db` and of migrations: a plugin with tables takes it from
// here, so it needs no Kysely of its own (a second copy, of another version perhaps).
export { CompiledQuery, sql } from 'kysely'
export type { ColumnType, Expression, ExpressionBuilder, Generated, Insertable, Kysely, Selectable, SqlBool, Transaction, Updateable } from 'kysely'

// Tables that behave the same on SQLite and MySQL/MariaDB; rowBuilder: row objects from value arrays, one literal compiled per column list;
// valueListers: the inverse, rows as one flat value list for a multi-row statement, compiled per column list.
export { isStoreOutage, isUniqueViolation, portableTable, retryOnDeadlock, retryWhen, rowBuilder, valueListers, type Dialect, type ValueLister } from './storage/database.ts'

