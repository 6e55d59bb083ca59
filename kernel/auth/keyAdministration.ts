import type { Kysely, Selectable, Transaction, Updateable } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { retryOnDeadlock, type Dialect } from '../storage/database.ts'
import type { SecretBox } from './secrets.ts'
import { issueKey, newKeyCredentials, type IssuedKey, type KeyFields } from './keyIssuer.ts'
import type { TenantServices } from '../tenants/tenants.ts'
import { changedFields, readAudit, recordChange, type AuditQuery, type AuditRecord } from '../audit/auditTrail.ts'
import { unnamedKeyColumns } from '../audit/auditFields.ts'
import type { EventBus } from '../events/events.ts'
import { endsBy, keyChangeEvent, keyRotatedEvent } from '../events/keyEvents.ts'

/** What the audit trail needs of the caller (issue 16 item 4). */
export interface ChangeOptions {
  /** The request that made the change (its log record); absent outside a call. */
  requestId?: number
}

/** A stored key as plugins see it: every column but the sealed secret. */
export type KeyRecord = Omit<Selectable<CoreTables['api_keys']>, 'secret_enc' | 'prev_secret_enc'>

/** The columns an edit may change (the Api_Key, its secret and the creator stay). */
export type KeyChanges = Omit<Updateable<CoreTables['api_keys']>, 'id' | 'api_key' | 'secret_enc' | 'created_by' | 'created_at' | 'updated_at' | 'prev_secret_enc' | 'prev_secret_ends'>

/** A group and the ACL paths it grants (D9's group record). */
export interface GroupRecord {
  Id: number
  Display_Name: string
  Paths: string[]
}

export type { IssuedKey, KeyFields }

/** Whether an edit makes a key count in its tenant's MaxKeys where it did not before (D14: ended keys do not count). */
function startsToCount(before: { end_date: number | null; parent: number; custno: number }, after: { end_date?: number | null; parent?: number; custno?: number }, now: number): boolean {
  const inUse = (endDate: number | null | undefined) => endDate === null || endDate === undefined || Number(endDate) > now
  if (!inUse(after.end_date)) return false
  return !inUse(before.end_date) || Number(after.parent) !== Number(before.parent) || Number(after.custno) !== Number(before.custno)
}

const creditColumns = new Set(['credits', 'refill_amount', 'refill_every', 'refill_at'])

/**
 * The audit action of an API edit, in issue 16's kinds and the operator CLI's names:
 * ending a key in use is `key.disable` (as the `key.disabled` event), starting an
 * ended one again `key.enable`, changing only its credits `key.credits`.
 */
function editAction(before: { end_date: number | null }, after: { end_date?: number | null }, changed: Record<string, unknown>, now: number): string {
  if (!endsBy(before.end_date, now) && endsBy(after.end_date, now)) return 'key.disable'
  if (endsBy(before.end_date, now) && !endsBy(after.end_date, now)) return 'key.enable'
  const names = Object.keys(changed)
  return names.length > 0 && names.every((name) => creditColumns.has(name)) ? 'key.credits' : 'key.edit'
}

/**
 * An edit's changed fields, for its audit record and event. Refill is one API field
 * (`{ Amount, Every }` or null) kept in two columns: when either changes, both sides
 * carry both, so a record never shows half a Refill. Columns with no API name
 * (unnamedKeyColumns: refill_at, the count as set) are left out.
 */
function keyChangedFields(row: Selectable<CoreTables['api_keys']>, changes: KeyChanges): { before: Record<string, unknown>; after: Record<string, unknown> } {
  const named = Object.fromEntries(Object.entries(changes).filter(([column]) => !unnamedKeyColumns.has(column))) as KeyChanges
  const fields = changedFields(row, named)
  if ('refill_amount' in fields.after || 'refill_every' in fields.after) {
    const next = { ...row, ...changes }
    for (const [side, key] of [[fields.before, row], [fields.after, next]] as const) {
      side.refill_amount = key.refill_amount === null ? null : Number(key.refill_amount)
      side.refill_every = key.refill_every
    }
  }
  return fields
}

function withoutSecret(row: Selectable<CoreTables['api_keys']>): KeyRecord {
  const { secret_enc: _sealed, prev_secret_enc: _previous, ...record } = row
  return record
}

/**
 * The kernel owns keys, groups and their ACL: plugins change them only through this
 * service, which drops every cached copy (auth records, access profiles, cached
 * answers; on every process) itself, so no plugin can forget an invalidation.
 */
export class KeyAdministration {
  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly dialect: Dialect,
    private readonly secrets: SecretBox,
    private readonly clock: () => number,
    private readonly invalidate: { key(keyId: number): void; access(): void },
    /** The tenant's MaxKeys (D14), checked inside the create's transaction; absent = no limits. */
    private readonly tenants?: Pick<TenantServices, 'ensureRoom'>,
    /** key.changed, key.disabled and key.rotated (issue 17), emitted inside the change's transaction. */
    private readonly events?: Pick<EventBus, 'emit'>,
  ) {}

  /**
   * A new key and its groups, in one transaction. A taken Display_Name surfaces as the
   * database's unique violation (`isUniqueViolation`), with nothing written.
   */
  create(fields: KeyFields, groupIds: readonly number[], options: ChangeOptions = {}): Promise<IssuedKey> {
    const tenants = this.tenants
    const now = this.clock()
    const steps = {
      // A key past its tenant's MaxKeys is refused with 403, nothing written.
      before: tenants ? (trx: Kysely<CoreTables>) => tenants.ensureRoom(trx, 'Keys', [{ parent: Number(fields.parent), custno: Number(fields.custno), count: 1 }]) : undefined,
      after: (trx: Kysely<CoreTables>, keyId: number) => recordChange(trx, now, {
        who: fields.created_by ?? null, parent: Number(fields.parent), custno: Number(fields.custno), action: 'key.create', keyId,
        after: { ...fields, groups: [...groupIds] }, requestId: options.requestId,
      }),
    }
    return retryOnDeadlock(() => issueKey(this.db, this.secrets, now, fields, groupIds, steps))
  }

  /** One key as stored, never its secret (a caller reading its own key: /account/read/user). */
  async find(keyId: number): Promise<KeyRecord | undefined> {
    const row = await this.db.selectFrom('api_keys').selectAll().where('id', '=', keyId).executeTakeFirst()
    return row === undefined ? undefined : withoutSecret(row)
  }

  /** The id of the key with this Api_Key value, whoever owns it (only compared, never shown). */
  async idByApiKey(apiKey: string): Promise<number | undefined> {
    const row = await this.db.selectFrom('api_keys').select(['id', 'api_key']).where('api_key', '=', apiKey).executeTakeFirst()
    // Compared again here: MariaDB's collation ignores trailing spaces, SQLite does not.
    return row === undefined || row.api_key !== apiKey ? undefined : Number(row.id)
  }

  /**
   * Edits a key that `editorKeyId` created (never the editor itself, D9), all or
   * nothing: `change` sees the stored record (locked on MySQL, so two edits of one key
   * apply one after the other) and returns the columns to set; `groupIds` replaces the
   * key's groups. Undefined when there is no such key for this editor. The key's
   * cached records and answers are dropped before this returns.
   */
  async edit(
    keyId: number,
    editorKeyId: number,
    change: (current: KeyRecord) => KeyChanges,
    groupIds?: readonly number[],
    options: ChangeOptions = {},
  ): Promise<{ record: KeyRecord; secret: string } | undefined> {
    const edited = await retryOnDeadlock(() =>
      this.db.transaction().execute(async (trx) => {
        const row = await this.editableKey(trx, keyId, editorKeyId)
        if (!row) return undefined
        const changes = { ...change(withoutSecret(row)), updated_at: this.clock() }
        // A key that starts to count in a tenant (enabled again, or moved to another customer) needs room there.
        const next = { ...row, ...changes }
        if (this.tenants && startsToCount(row, next, changes.updated_at)) {
          // A key in use moved to another customer of its parent leaves the parent's total as it was.
          const move = !endsBy(row.end_date, changes.updated_at) && Number(next.parent) === Number(row.parent)
          await this.tenants.ensureRoom(trx, 'Keys', [{ parent: Number(next.parent), custno: Number(next.custno), count: 1, move }])
        }
        await trx.updateTable('api_keys').set(changes).where('id', '=', keyId).execute()
        const fields = keyChangedFields(row, changes)
        if (groupIds !== undefined) {
          const held = await trx.selectFrom('api_key_groups').select('group_id').where('key_id', '=', keyId).orderBy('group_id').execute()
          await trx.deleteFrom('api_key_groups').where('key_id', '=', keyId).execute()
          await trx.insertInto('api_key_groups').values(groupIds.map((groupId) => ({ key_id: keyId, group_id: groupId }))).execute()
          const before = held.map((group) => Number(group.group_id))
          const after = [...groupIds].sort((a, b) => a - b)
          if (JSON.stringify(before) !== JSON.stringify(after)) Object.assign(fields, { before: { ...fields.before, groups: before }, after: { ...fields.after, groups: after } })
        }
        // An edit that changes nothing is no administrative change: no audit record, no event.
        if (Object.keys(fields.after).length > 0) {
          // The record names the key's tenant before the edit (a move shows in before/after).
          await recordChange(trx, changes.updated_at, {
            who: editorKeyId, parent: Number(row.parent), custno: Number(row.custno), action: editAction(row, next, fields.after, changes.updated_at), keyId,
            before: fields.before, after: fields.after, requestId: options.requestId,
          })
          await this.events?.emit(trx, keyChangeEvent(row, next, fields.after, changes.updated_at))
        }
        return { ...row, ...changes } as Selectable<CoreTables['api_keys']>
      }),
    )
    if (!edited) return undefined
    this.invalidate.key(keyId)
    return { record: withoutSecret(edited), secret: this.secrets.open(edited.secret_enc, edited.api_key) }
  }

  /**
   * A new secret for a key that `editorKeyId` created (the same authority as edit), the
   * current one kept as the previous secret until `oldSecretValidForMs` from now (0: it
   * stops now). Rotating again replaces any earlier previous secret, which ends at once.
   * Undefined when there is no such key for this editor. Caches are dropped before this returns.
   */
  async rotate(keyId: number, editorKeyId: number, oldSecretValidForMs: number, options: ChangeOptions = {}): Promise<{ record: KeyRecord; secret: string; oldSecretEnds: number } | undefined> {
    const secret = newKeyCredentials().secret
    const rotated = await retryOnDeadlock(() =>
      this.db.transaction().execute(async (trx) => {
        const row = await this.editableKey(trx, keyId, editorKeyId)
        if (!row) return undefined
        const now = this.clock()
        const changes = {
          secret_enc: this.secrets.seal(secret, row.api_key),
          prev_secret_enc: oldSecretValidForMs > 0 ? row.secret_enc : null,
          // Up to a whole second: OldSecretEnds is shown as an HTTP-date (whole seconds), and
          // the old secret must stop exactly then, not up to a second after the date shown.
          prev_secret_ends: Math.ceil((now + oldSecretValidForMs) / 1000) * 1000,
          updated_at: now,
        }
        await trx.updateTable('api_keys').set(changes).where('id', '=', keyId).execute()
        await recordChange(trx, now, {
          who: editorKeyId, parent: Number(row.parent), custno: Number(row.custno), action: 'key.rotate', keyId,
          before: { prev_secret_ends: row.prev_secret_ends === null ? null : Number(row.prev_secret_ends) },
          after: { prev_secret_ends: changes.prev_secret_ends }, requestId: options.requestId,
        })
        await this.events?.emit(trx, keyRotatedEvent(row, changes.prev_secret_ends))
        return { ...row, ...changes }
      }),
    )
    if (!rotated) return undefined
    this.invalidate.key(keyId)
    return { record: withoutSecret(rotated), secret, oldSecretEnds: rotated.prev_secret_ends }
  }

  /**
   * A key `editorKeyId` may change (D9): one it created, never itself. Locked for the
   * rest of the transaction on MySQL, so two changes of one key apply one after the
   * other (SQLite runs one transaction at a time anyway).
   */
  private editableKey(trx: Transaction<CoreTables>, keyId: number, editorKeyId: number) {
    return trx
      .selectFrom('api_keys')
      .selectAll()
      .where('id', '=', keyId)
      .where('created_by', '=', editorKeyId)
      .where('id', '<>', editorKeyId)
      .$if(this.dialect === 'mysql', (query) => query.forUpdate())
      .executeTakeFirst()
  }

  /** The keys a key created, oldest first, with the groups each holds. */
  async createdBy(creatorKeyId: number): Promise<{ keys: KeyRecord[]; groups: Map<number, { Id: number; Display_Name: string }[]> }> {
    const [rows, groupRows] = await Promise.all([
      this.db.selectFrom('api_keys').selectAll().where('created_by', '=', creatorKeyId).orderBy('id').execute(),
      this.db
        .selectFrom('api_key_groups as kg')
        .innerJoin('api_keys as k', 'k.id', 'kg.key_id')
        .innerJoin('api_groups as g', 'g.id', 'kg.group_id')
        .select(['kg.key_id as keyId', 'g.id as groupId', 'g.display_name as groupName'])
        .where('k.created_by', '=', creatorKeyId)
        .orderBy('kg.key_id')
        .orderBy('g.id')
        .execute(),
    ])
    const groups = new Map<number, { Id: number; Display_Name: string }[]>()
    for (const row of groupRows) {
      const keyId = Number(row.keyId)
      const list = groups.get(keyId) ?? []
      list.push({ Id: Number(row.groupId), Display_Name: row.groupName })
      groups.set(keyId, list)
    }
    return { keys: rows.map(withoutSecret), groups }
  }

  /**
   * The groups a key holds with their paths, read from the database rather than the
   * cached auth record, so an operator's change of the key's groups counts at once.
   */
  async groupsOf(keyId: number): Promise<GroupRecord[]> {
    const rows = await this.db
      .selectFrom('api_key_groups as kg')
      .innerJoin('api_groups as g', 'g.id', 'kg.group_id')
      .leftJoin('api_group_acl as ga', 'ga.group_id', 'g.id')
      .leftJoin('api_acl as a', 'a.id', 'ga.acl_id')
      .select(['g.id as groupId', 'g.display_name as groupName', 'a.path as path'])
      .where('kg.key_id', '=', keyId)
      .orderBy('g.id')
      .orderBy('a.id')
      .execute()
    const byId = new Map<number, GroupRecord>()
    for (const row of rows) {
      const groupId = Number(row.groupId)
      let group = byId.get(groupId)
      if (!group) {
        group = { Id: groupId, Display_Name: row.groupName, Paths: [] }
        byId.set(groupId, group)
      }
      if (row.path !== null) group.Paths.push(row.path)
    }
    return [...byId.values()]
  }

  /** A tenant's audit records, newest first (issue 16 item 4); the caller has checked who may read them. */
  audit(query: AuditQuery): Promise<{ Total: number; Page: number; Records: AuditRecord[] }> {
    return readAudit(this.db, query)
  }

  /** A key was changed outside this service (the operator CLI, a test): forget it everywhere now. */
  changed(keyId: number): void {
    this.invalidate.key(keyId)
  }

  /** ACL entries or groups changed: forget every loaded key and access profile everywhere now. */
  accessChanged(): void {
    this.invalidate.access()
  }
}
