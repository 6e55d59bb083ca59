import { sql, type Kysely } from 'kysely'
import { portableTable, type Dialect } from './database.ts'
import { adminGroupName, type Migrations } from '../plugin.ts'

/** Versioned migrations of the kernel's tables (CoreTables). Append, never edit. */
export function coreMigrations(dialect: Dialect): Migrations {
  const table = (db: Kysely<unknown>, name: string) => portableTable(dialect, db.schema.createTable(name))
  const autoId = dialect === 'mysql' ? 'bigint' : 'integer'
  return {
    '0001-access': {
      async up(db) {
        await table(db, 'api_acl')
          .addColumn('id', autoId, (c) => c.primaryKey().autoIncrement())
          .addColumn('path', 'varchar(255)', (c) => c.notNull())
          .addColumn('display_name', 'varchar(255)', (c) => c.notNull())
          .addColumn('is_public', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('require_https', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('require_hash', 'integer', (c) => c.notNull().defaultTo(0))
          .execute()
        await table(db, 'api_groups')
          .addColumn('id', autoId, (c) => c.primaryKey().autoIncrement())
          .addColumn('display_name', 'varchar(255)', (c) => c.notNull().unique())
          .execute()
        await table(db, 'api_group_acl')
          .addColumn('group_id', 'bigint', (c) => c.notNull())
          .addColumn('acl_id', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('api_group_acl_pk', ['group_id', 'acl_id'])
          .execute()
        await table(db, 'api_keys')
          .addColumn('id', autoId, (c) => c.primaryKey().autoIncrement())
          .addColumn('api_key', 'varchar(64)', (c) => c.notNull().unique())
          .addColumn('secret_enc', 'varchar(255)', (c) => c.notNull())
          .addColumn('display_name', 'varchar(255)', (c) => c.notNull())
          .addColumn('parent', 'bigint', (c) => c.notNull())
          .addColumn('custno', 'bigint', (c) => c.notNull())
          .addColumn('email', 'varchar(255)')
          .addColumn('phone', 'varchar(100)')
          .addColumn('start_date', 'bigint')
          .addColumn('end_date', 'bigint')
          .addColumn('day_pass', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('require_https', 'integer', (c) => c.notNull().defaultTo(1))
          .addColumn('allow_hours', 'double precision')
          .addColumn('response_format', 'varchar(8)', (c) => c.notNull().defaultTo('json'))
          .addColumn('log_level', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('log_raw', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('max_hits', 'varchar(255)')
          .addColumn('require_hash', 'integer')
          .addColumn('created_by', 'bigint')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .addUniqueConstraint('api_keys_parent_name', ['parent', 'display_name'])
          .execute()
        await db.schema.createIndex('api_keys_created_by').on('api_keys').column('created_by').execute()
        await table(db, 'api_key_groups')
          .addColumn('key_id', 'bigint', (c) => c.notNull())
          .addColumn('group_id', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('api_key_groups_pk', ['key_id', 'group_id'])
          .execute()
        await table(db, 'kernel_settings')
          .addColumn('name', 'varchar(100)', (c) => c.primaryKey())
          .addColumn('value', 'text', (c) => c.notNull())
          .execute()
      },
    },
    '0002-call-log': {
      async up(db) {
        const longText = dialect === 'mysql' ? sql`mediumtext` : sql`text`
        await table(db, 'api_log')
          .addColumn('id', 'bigint', (c) => c.primaryKey())
          .addColumn('key_id', 'bigint')
          .addColumn('request_time', 'bigint', (c) => c.notNull())
          .addColumn('http_host', 'varchar(255)')
          .addColumn('server_name', 'varchar(100)')
          .addColumn('server_addr', 'varchar(64)')
          .addColumn('server_port', 'integer')
          .addColumn('remote_addr', 'varchar(64)')
          .addColumn('request_scheme', 'varchar(8)')
          .addColumn('request_method', 'varchar(8)', (c) => c.notNull())
          .addColumn('api_acl', 'bigint')
          .addColumn('api_function', 'varchar(255)', (c) => c.notNull())
          .addColumn('request_url', 'text')
          .addColumn('http_user_agent', 'text')
          .addColumn('raw_request', longText)
          .addColumn('response_code', 'integer', (c) => c.notNull())
          .addColumn('response', longText)
          .addColumn('response_format', 'varchar(8)')
          .addColumn('seconds', 'double precision', (c) => c.notNull())
          .addColumn('bandwidth', 'integer', (c) => c.notNull())
          .addColumn('detail_until', 'bigint', (c) => c.notNull())
          .execute()
        // A key's history page, newest first; and the two retention sweeps.
        await db.schema.createIndex('api_log_key_id').on('api_log').columns(['key_id', 'id']).execute()
        await db.schema.createIndex('api_log_detail_until').on('api_log').column('detail_until').execute()
      },
    },
    '0003-idempotency': {
      async up(db) {
        const longText = dialect === 'mysql' ? sql`mediumtext` : sql`text`
        await table(db, 'api_idempotency')
          .addColumn('key_id', 'bigint', (c) => c.notNull())
          .addColumn('idem_key', 'varchar(255)', (c) => c.notNull())
          .addColumn('request_hash', 'varchar(64)', (c) => c.notNull())
          .addColumn('status', 'integer', (c) => c.notNull())
          .addColumn('content_type', 'varchar(100)')
          .addColumn('headers', 'text')
          .addColumn('body', longText)
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('api_idempotency_pk', ['key_id', 'idem_key'])
          .execute()
        await db.schema.createIndex('api_idempotency_created').on('api_idempotency').column('created_at').execute()
      },
    },
    '0004-node-registry': {
      async up(db) {
        await table(db, 'kernel_nodes')
          .addColumn('node_id', 'integer', (c) => c.primaryKey())
          .addColumn('instance_token', 'varchar(64)', (c) => c.notNull())
          .addColumn('server_name', 'varchar(100)', (c) => c.notNull())
          .addColumn('server_addr', 'varchar(64)')
          .addColumn('server_port', 'integer')
          .addColumn('version', 'varchar(32)', (c) => c.notNull())
          .addColumn('started', 'bigint', (c) => c.notNull())
          .addColumn('last_seen', 'bigint', (c) => c.notNull())
          .execute()
      },
    },
    '0005-tenants': {
      async up(db) {
        await table(db, 'tenant_entitlements')
          .addColumn('parent', 'bigint', (c) => c.notNull())
          .addColumn('custno', 'bigint', (c) => c.notNull())
          .addColumn('max_keys', 'integer')
          .addColumn('max_people', 'integer')
          .addColumn('max_players', 'integer')
          .addColumn('time_zone', 'varchar(64)')
          .addColumn('updated_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('tenant_entitlements_pk', ['parent', 'custno'])
          .execute()
        await table(db, 'tenant_players')
          .addColumn('id', autoId, (c) => c.primaryKey().autoIncrement())
          .addColumn('parent', 'bigint', (c) => c.notNull())
          .addColumn('custno', 'bigint', (c) => c.notNull())
          .addColumn('name', 'varchar(100)', (c) => c.notNull())
          .addColumn('disp_group', 'varchar(100)')
          .addColumn('location', 'varchar(100)')
          .addColumn('key_id', 'bigint', (c) => c.notNull().unique())
          .addColumn('last_seen', 'bigint')
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addUniqueConstraint('tenant_players_name', ['parent', 'custno', 'name'])
          .execute()
      },
    },
    '0006-key-rotation': {
      async up(db) {
        await db.schema.alterTable('api_keys').addColumn('prev_secret_enc', 'text').execute()
        await db.schema.alterTable('api_keys').addColumn('prev_secret_ends', 'bigint').execute()
        await db.schema.alterTable('api_log').addColumn('signed_with', 'varchar(8)').execute()
      },
    },
    '0007-audit': {
      async up(db) {
        await table(db, 'api_audit')
          .addColumn('id', autoId, (c) => c.primaryKey().autoIncrement())
          .addColumn('at', 'bigint', (c) => c.notNull())
          .addColumn('who_key_id', 'bigint')
          .addColumn('parent', 'bigint', (c) => c.notNull())
          .addColumn('custno', 'bigint', (c) => c.notNull())
          .addColumn('action', 'varchar(40)', (c) => c.notNull())
          .addColumn('key_id', 'bigint')
          .addColumn('before', 'text')
          .addColumn('after', 'text')
          .addColumn('request_id', 'bigint')
          .execute()
        await db.schema.createIndex('api_audit_tenant').on('api_audit').columns(['parent', 'custno', 'id']).execute()
        await db.schema.createIndex('api_audit_at').on('api_audit').column('at').execute()
      },
    },
    '0008-credits': {
      async up(db) {
        // Issue 16: a key's credits and refill, and the tenant-wide MaxHits.
        await db.schema.alterTable('api_keys').addColumn('credits', 'bigint').execute()
        await db.schema.alterTable('api_keys').addColumn('refill_amount', 'bigint').execute()
        await db.schema.alterTable('api_keys').addColumn('refill_every', 'varchar(8)').execute()
        await db.schema.alterTable('api_keys').addColumn('refill_at', 'bigint').execute()
        await db.schema.alterTable('tenant_entitlements').addColumn('max_hits', 'varchar(255)').execute()
      },
    },
    '0009-shared-answers': {
      async up(db) {
        // Issue 19, goal 2: a level-2 record of an answer served from the response cache
        // names the answer by its digest; the answer's text is kept once (callLog/sharedAnswers.ts).
        const longText = dialect === 'mysql' ? sql`mediumtext` : sql`text`
        await db.schema.alterTable('api_log').addColumn('response_digest', 'varchar(64)').execute()
        await table(db, 'api_log_body')
          .addColumn('digest', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('body', longText, (c) => c.notNull())
          .addColumn('keep_until', 'bigint', (c) => c.notNull())
          .execute()
        await db.schema.createIndex('api_log_body_keep_until').on('api_log_body').column('keep_until').execute()
      },
    },
    '0010-used-signatures': {
      async up(db) {
        // Issue 12 item 4 without Redis: the signatures of writes already made, so a
        // replay is refused by every process on the database and after a restart.
        await table(db, 'api_used_signatures')
          .addColumn('key_id', 'bigint', (c) => c.notNull())
          .addColumn('signature', 'varchar(128)', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('api_used_signatures_pk', ['key_id', 'signature'])
          .execute()
        await db.schema.createIndex('api_used_signatures_expires').on('api_used_signatures').column('expires_at').execute()
      },
    },
    '0011-servers-in-admin-group': {
      // D9 and D14 together: version 0.3.1 kept GET /Api/Read/Servers in a group of its
      // own, "Service administration", that /Api/Read/Groups hid although the root key
      // held it. Its path now lives in the admin default group (kernel/plugin.ts
      // adminGroupName), which no key may assign. Idempotent: a start that stopped
      // half-way finishes it on the next one. A fresh database has no groups yet.
      async up(db: Kysely<any>) {
        const former = await db.selectFrom('api_groups').select('id').where('display_name', '=', 'Service administration').executeTakeFirst()
        if (!former) return
        const admin = await db.selectFrom('api_groups').select('id').where('display_name', '=', adminGroupName).executeTakeFirst()
        // Without the keys plugin there is no admin group yet: the former group becomes it.
        if (!admin) return void await db.updateTable('api_groups').set({ display_name: adminGroupName }).where('id', '=', former.id).execute()
        const entries = await db.selectFrom('api_group_acl').innerJoin('api_acl', 'api_acl.id', 'api_group_acl.acl_id')
          .select(['api_acl.id', 'api_acl.path']).where('api_group_acl.group_id', '=', former.id).execute()
        const servers = entries.filter((entry) => entry.path.toLowerCase() === '/api/read/servers').map((entry) => entry.id)
        if (servers.length > 0) {
          const linked = new Set((await db.selectFrom('api_group_acl').select('acl_id').where('group_id', '=', admin.id).where('acl_id', 'in', servers).execute()).map((row) => Number(row.acl_id)))
          const missing = servers.filter((aclId) => !linked.has(Number(aclId)))
          if (missing.length > 0) await db.insertInto('api_group_acl').values(missing.map((aclId) => ({ group_id: admin.id, acl_id: aclId }))).execute()
          await db.deleteFrom('api_group_acl').where('group_id', '=', former.id).where('acl_id', 'in', servers).execute()
        }
        // A group the operator gave other paths stays, as an ordinary group, without this one.
        if (entries.length > servers.length) return
        await db.deleteFrom('api_key_groups').where('group_id', '=', former.id).execute()
        await db.deleteFrom('api_groups').where('id', '=', former.id).execute()
      },
    },
    '0012-credits-set': {
      // Issue 17 item 2: credits without a Refill tell 80 % of the count as it was last
      // set, once per setting. A key with credits from before starts from the count it
      // has now, set when the key last changed (the once key its 100 % event had).
      async up(db: Kysely<any>) {
        await db.schema.alterTable('api_keys').addColumn('credits_set', 'bigint').execute()
        await db.schema.alterTable('api_keys').addColumn('credits_set_at', 'bigint').execute()
        await db.updateTable('api_keys').set({ credits_set: sql`credits`, credits_set_at: sql`updated_at` }).where('credits', 'is not', null).execute()
      },
    },
    '0013-partition-changes': {
      // D11 and D16 without Redis: a cache partition (a tenant's people listings) that one
      // process changed, read by the others on the same database (cluster/partitionChanges.ts).
      async up(db) {
        await table(db, 'kernel_partition_changes')
          .addColumn('id', autoId, (c) => c.primaryKey().autoIncrement())
          .addColumn('name', 'varchar(255)', (c) => c.notNull())
          .addColumn('changed', 'bigint', (c) => c.notNull())
          .execute()
        await db.schema.createIndex('kernel_partition_changes_changed').on('kernel_partition_changes').column('changed').execute()
      },
    },
  }
}
