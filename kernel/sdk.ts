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
  KernelServices,
  LogRecord,
  Migration,
  Migrations,
  MountedRouteInfo,
  Plugin,
  PluginDatabase,
  ResponseFormat,
  Route,
  WindowStatus,
} from './plugin.ts'
export { defineRoute } from './plugin.ts'

// Errors: throw these from a handler; the kernel answers `status` + `Error: ...` (D6).
export { ApiError, badRequest, forbidden, notFound, unauthorized, type ErrorCode } from './http/errors.ts'

// Dates: answers carry HTTP-dates; inputs accept HTTP-date or RFC 3339 (D9).
export { httpDate, parseInputDate } from './auth/apiDate.ts'

// MaxHits (D7): the one parser of the rate-limit grammar.
export { MaxHitsError, formatMaxHits, parseMaxHits, type RateWindow } from './limits/maxHits.ts'

// ACL paths: `*` as the last segment covers that level and every deeper one.
export { compileAclPath, type AclMatcher } from './auth/aclPath.ts'

// Keys, groups and ACL belong to the kernel; plugins change them through `kernel.keys`.
export type { GroupRecord, IssuedKey, KeyAdministration, KeyChanges, KeyFields, KeyRecord } from './auth/keyAdministration.ts'

// The service's live processes (D16), as `kernel.servers.live()` lists them.
export type { LiveServer } from './cluster/nodeRegistry.ts'

// Input checks with the kernel's own schema layer, and its 400 text.
export { schemaCheck } from './http/schemas.ts'
export { describeSchemaError } from './http/schemaErrors.ts'

// Tables that behave the same on SQLite and MySQL/MariaDB.
export { isUniqueViolation, portableTable, retryOnDeadlock, type Dialect } from './storage/database.ts'

// An answer of its own content type (a page, a feed), sent as it is instead of json/xml/csv.
export { RawAnswer } from './http/rawAnswer.ts'
