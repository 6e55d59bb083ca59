import { LRUCache } from 'lru-cache'
import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import type { AclEntry, CallerKey, ResponseFormat, TenantQuota } from '../plugin.ts'
import type { SecretBox } from './secrets.ts'
import { compileAclPath } from './aclPath.ts'
import { effectiveAclEntry } from './effectiveAcl.ts'
import { parseMaxHits, type RateWindow } from '../limits/maxHits.ts'
import type { HashMethod } from './signature.ts'

/**
 * What a set of groups grants: the ACL entries (with the public ones) and a per-route
 * memo of the entry that allows each route. Keys with the same groups share one
 * profile, so a million keys do not mean a million copies of the same ACL.
 */
export interface AccessProfile {
  groupIds: readonly number[]
  acl: readonly AclEntry[]
  /** Route path -> the merged ACL entry that governs it (null: none). Filled as routes are called. */
  aclByRoute: Map<string, AclEntry | null>
}

/** Everything authentication needs about one key, loaded once and kept in an LRU. */
export interface AuthRecord {
  caller: CallerKey
  secret: string
  profile: AccessProfile
  /** The secret before the last rotation and when it stops being accepted (issue 16); null: none. */
  previous: { secret: string; ends: number } | null
}

/** Which of a key's secrets signed a call (the call log's `Secret`). */
export type SignedWith = 'current' | 'previous'

interface AclRow { id: number; path: string; display_name: string; is_public: number; require_https: number; require_hash: number }

export function toAclEntry(row: AclRow): AclEntry {
  return {
    id: Number(row.id),
    path: row.path,
    displayName: row.display_name,
    isPublic: Number(row.is_public),
    requireHttps: Number(row.require_https),
    requireHash: Number(row.require_hash) as HashMethod,
    matches: compileAclPath(row.path),
  }
}

const noWindows: readonly RateWindow[] = Object.freeze([])

interface ParsedMaxHits {
  text: string | null
  windows: readonly RateWindow[]
}

/** The stored ResponseFormat as one shared string each, not one per loaded key. */
const responseFormats = new Map<string, ResponseFormat>([['json', 'json'], ['xml', 'xml'], ['csv', 'csv']])

/**
 * Looks keys up by their Api_Key value. Hits are kept `ttlSeconds` (and dropped at
 * once by `forget`); misses for a few seconds, so a flood of unknown keys does not
 * become a flood of queries. Access profiles and parsed MaxHits are shared between
 * keys and expire with the same TTL, so an operator's ACL change shows within it.
 */
export class KeyDirectory {
  private readonly records: LRUCache<string, AuthRecord | false>
  private readonly apiKeyById = new Map<number, string>()
  private readonly profiles: LRUCache<string, AccessProfile>
  /** Parsed MaxHits by its text, with that text kept once: many keys share a few values. */
  private readonly maxHitsByText = new LRUCache<string, ParsedMaxHits>({ max: 10_000 })
  /** A tenant's quotas (its own and its parent's MaxHits), shared by its keys; expire with the same TTL. */
  private readonly quotasByTenant: LRUCache<string, readonly TenantQuota[]>
  private publicAcl: AclEntry[] = []
  private publicLoadedAt = 0
  /**
   * Bumped by every forget: a load that began before one may have read the row as it was
   * before the change (its queries are not one transaction), so it answers its own call
   * but caches nothing. Without this a key disabled while a call was loading it stayed
   * loaded, and working, for the whole TTL.
   */
  private epoch = 0

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly secrets: SecretBox,
    private readonly clock: () => number,
    maxEntries: number,
    private readonly ttlSeconds: number,
  ) {
    this.records = new LRUCache({
      max: maxEntries,
      dispose: (record, apiKey) => {
        if (record && this.apiKeyById.get(record.caller.id) === apiKey) this.apiKeyById.delete(record.caller.id)
      },
    })
    this.profiles = new LRUCache({ max: 10_000, ttl: ttlSeconds * 1000 })
    this.quotasByTenant = new LRUCache({ max: 10_000, ttl: ttlSeconds * 1000 })
  }

  /** Loaded keys (and remembered misses) and access profiles held now: both bounded (cache.maxEntries, 10,000). */
  get sizes(): { keys: number; accessProfiles: number } {
    return { keys: this.records.size, accessProfiles: this.profiles.size }
  }

  /** The cached record if there is one: the hot path stays synchronous on a hit. */
  cached(apiKey: string): AuthRecord | false | undefined {
    return this.records.get(apiKey)
  }

  async load(apiKey: string): Promise<AuthRecord | false> {
    const cached = this.records.get(apiKey)
    if (cached !== undefined) return cached
    if (apiKey.length > 64) return false
    const epoch = this.epoch
    const row = await this.db.selectFrom('api_keys').selectAll().where('api_key', '=', apiKey).executeTakeFirst()
    if (!row) {
      if (this.epoch === epoch) this.records.set(apiKey, false, { ttl: 5000 })
      return false
    }
    const keyId = Number(row.id)
    const groups = await this.db.selectFrom('api_key_groups').select('group_id').where('key_id', '=', keyId).orderBy('group_id').execute()
    const profile = await this.profileFor(groups.map((group) => Number(group.group_id)))
    const tenantQuotas = await this.quotasOf(Number(row.parent), Number(row.custno))
    const maxHits = this.maxHitsOf(row.max_hits)
    const caller: CallerKey = {
      id: keyId,
      // The LRU's key when equal (it is, unless a collation matched another case): one string, not two.
      apiKey: row.api_key === apiKey ? apiKey : row.api_key,
      displayName: row.display_name,
      parent: Number(row.parent),
      custno: Number(row.custno),
      startDate: row.start_date === null ? null : Number(row.start_date),
      endDate: row.end_date === null ? null : Number(row.end_date),
      dayPass: Number(row.day_pass),
      requireHttps: Number(row.require_https),
      allowHours: row.allow_hours === null ? null : Number(row.allow_hours),
      responseFormat: (responseFormats.get(row.response_format) ?? row.response_format) as ResponseFormat,
      logLevel: Number(row.log_level),
      logRaw: Number(row.log_raw),
      maxHits: maxHits.text,
      rateWindows: maxHits.windows,
      requireHash: row.require_hash === null ? null : (Number(row.require_hash) as HashMethod),
      createdBy: row.created_by === null ? null : Number(row.created_by),
      groupIds: profile.groupIds,
      acl: profile.acl,
      anonymous: false,
      // Only whether the key pays: the count itself lives in the database (limits/credits.ts).
      metered: row.credits !== null,
      tenantQuotas,
    }
    const previous = row.prev_secret_enc !== null && row.prev_secret_ends !== null && Number(row.prev_secret_ends) > this.clock()
      ? { secret: this.secrets.open(row.prev_secret_enc, row.api_key), ends: Number(row.prev_secret_ends) }
      : null
    const record: AuthRecord = { caller, secret: this.secrets.open(row.secret_enc, row.api_key), profile, previous }
    if (this.epoch !== epoch) return record
    this.records.set(apiKey, record, { ttl: this.ttlSeconds * 1000 })
    this.apiKeyById.set(keyId, apiKey)
    return record
  }

  private async profileFor(groupIds: number[]): Promise<AccessProfile> {
    const name = groupIds.join(',')
    const known = this.profiles.get(name)
    if (known) return known
    const epoch = this.epoch
    const rows = groupIds.length === 0 ? [] : await this.db
      .selectFrom('api_group_acl as ga')
      .innerJoin('api_acl as a', 'a.id', 'ga.acl_id')
      .select(['a.id', 'a.path', 'a.display_name', 'a.is_public', 'a.require_https', 'a.require_hash'])
      .where('ga.group_id', 'in', groupIds)
      .orderBy('a.id')
      .execute()
    const acl: AclEntry[] = []
    const seen = new Set<number>()
    for (const entry of [...rows.map(toAclEntry), ...(await this.publicEntries())]) {
      if (seen.has(entry.id)) continue
      seen.add(entry.id)
      acl.push(entry)
    }
    const profile: AccessProfile = { groupIds: Object.freeze(groupIds), acl: Object.freeze(acl), aclByRoute: new Map() }
    if (this.epoch === epoch) this.profiles.set(name, profile)
    return profile
  }

  private maxHitsOf(text: string | null): ParsedMaxHits {
    if (text === null || text === '') return { text, windows: noWindows }
    let parsed = this.maxHitsByText.get(text)
    if (parsed === undefined) {
      parsed = { text, windows: Object.freeze(safeWindows(text)) }
      this.maxHitsByText.set(text, parsed)
    }
    return parsed
  }

  /**
   * The tenant-wide MaxHits over a key of (parent, custno): its own tenant's, then, for a
   * customer, its parent's (Custno 0: every customer together). Issue 16.
   */
  private async quotasOf(parent: number, custno: number): Promise<readonly TenantQuota[]> {
    const name = `${parent}:${custno}`
    let quotas = this.quotasByTenant.get(name)
    if (quotas !== undefined) return quotas
    const epoch = this.epoch
    const rows = await this.db.selectFrom('tenant_entitlements').select(['custno', 'max_hits'])
      .where('parent', '=', parent).where('custno', 'in', [...new Set([custno, 0])])
      .where('max_hits', 'is not', null).execute()
    const found: TenantQuota[] = []
    for (const tenant of [custno, 0]) {
      const row = rows.find((candidate) => Number(candidate.custno) === tenant)
      const windows = row ? this.maxHitsOf(row.max_hits).windows : noWindows
      if (windows.length > 0 && !found.some((quota) => quota.custno === tenant)) found.push({ parent, custno: tenant, windows })
    }
    quotas = Object.freeze(found)
    if (this.epoch === epoch) this.quotasByTenant.set(name, quotas)
    return quotas
  }

  /** Drops a key's record now (it was edited, disabled or its groups changed). */
  forget(keyId: number): void {
    this.epoch++
    const apiKey = this.apiKeyById.get(keyId)
    if (apiKey !== undefined) this.records.delete(apiKey)
  }

  /** Drops every record (an ACL entry or group changed). */
  forgetAll(): void {
    this.epoch++
    this.records.clear()
    this.apiKeyById.clear()
    this.profiles.clear()
    this.quotasByTenant.clear()
    this.publicLoadedAt = 0
  }

  /** Is_Public entries: callable by any key, and without credentials (refreshed each minute). */
  async publicEntries(): Promise<AclEntry[]> {
    if (this.clock() - this.publicLoadedAt > 60_000) {
      const rows = await this.db.selectFrom('api_acl').selectAll().where('is_public', '=', 1).orderBy('id').execute()
      this.publicAcl = rows.map(toAclEntry)
      this.publicLoadedAt = this.clock()
    }
    return this.publicAcl
  }

  /**
   * The ACL entry that governs `routePath` for this record: all matching entries merged,
   * the strictest rule winning (effectiveAcl.ts), memoised per route and profile.
   */
  aclFor(record: Pick<AuthRecord, 'caller' | 'profile'>, routePath: string): AclEntry | null {
    const memo = record.profile.aclByRoute
    let entry = memo.get(routePath)
    if (entry === undefined) {
      entry = effectiveAclEntry(record.caller.acl, routePath)
      memo.set(routePath, entry)
    }
    return entry
  }
}

function safeWindows(maxHits: string | null) {
  try {
    return parseMaxHits(maxHits)
  } catch {
    // Stored values were validated on the way in; an operator's hand edit that does
    // not parse must not lock the key out, so it counts as "no limit" until fixed.
    return []
  }
}
