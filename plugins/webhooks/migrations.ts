import { portableTable, type Migrations } from '../../kernel/sdk.ts'

/** Versioned migrations of the webhooks plugin's tables. Append new ones; never edit an applied one. */
export const webhookMigrations: Migrations = {
  '0001-webhooks': {
    async up(db, dialect) {
      const autoId = dialect === 'mysql' ? 'bigint' : 'integer'
      await portableTable(dialect, db.schema.createTable('webhooks'))
        .addColumn('id', autoId, (c) => c.primaryKey().autoIncrement())
        .addColumn('parent', 'bigint', (c) => c.notNull())
        .addColumn('custno', 'bigint', (c) => c.notNull())
        .addColumn('url', 'varchar(2048)', (c) => c.notNull())
        .addColumn('events', 'varchar(500)', (c) => c.notNull())
        .addColumn('secret_enc', 'varchar(512)', (c) => c.notNull())
        .addColumn('disabled', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('updated', 'bigint', (c) => c.notNull())
        .execute()
      // An event finds its tenant's webhooks (and those of its parent-wide administrators).
      await db.schema.createIndex('webhooks_scope').on('webhooks').columns(['parent', 'custno']).execute()

      await portableTable(dialect, db.schema.createTable('webhook_events'))
        .addColumn('id', autoId, (c) => c.primaryKey().autoIncrement())
        .addColumn('once_key', 'varchar(255)')
        .addColumn('type', 'varchar(64)', (c) => c.notNull())
        .addColumn('parent', 'bigint', (c) => c.notNull())
        .addColumn('custno', 'bigint', (c) => c.notNull())
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('created', 'bigint', (c) => c.notNull())
        .execute()
      // NULLs repeat freely on both engines: only once-only events are kept unique.
      await db.schema.createIndex('webhook_events_once').unique().on('webhook_events').column('once_key').execute()

      await portableTable(dialect, db.schema.createTable('webhook_deliveries'))
        .addColumn('id', 'varchar(40)', (c) => c.primaryKey())
        .addColumn('event_id', 'bigint', (c) => c.notNull())
        .addColumn('webhook_id', 'bigint', (c) => c.notNull())
        .addColumn('parent', 'bigint', (c) => c.notNull())
        .addColumn('custno', 'bigint', (c) => c.notNull())
        .addColumn('type', 'varchar(64)', (c) => c.notNull())
        .addColumn('status', 'varchar(16)', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('last_status', 'integer')
        .addColumn('last_error', 'varchar(500)')
        .addColumn('next_attempt', 'bigint', (c) => c.notNull())
        .addColumn('lease_owner', 'varchar(64)')
        .addColumn('lease_until', 'bigint')
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('delivered', 'bigint')
        .execute()
      // The senders' question: what is due now.
      await db.schema.createIndex('webhook_deliveries_due').on('webhook_deliveries').columns(['status', 'next_attempt']).execute()
      // The tenant's listing, newest first.
      await db.schema.createIndex('webhook_deliveries_scope').on('webhook_deliveries').columns(['parent', 'custno', 'created']).execute()
    },
  },
}
