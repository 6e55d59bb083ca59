import { portableTable, sql, type Dialect, type Kysely, type Migrations } from '../../kernel/sdk.ts'
import { storedRecords } from './storedRecord.ts'

/** A table with the kernel's portable options (utf8mb4 + binary collation on MySQL). */
function createTable(db: Kysely<any>, dialect: Dialect, name: string) {
  return portableTable(dialect, db.schema.createTable(name))
}

/** Auto-increment ids: SQLite wants exactly `integer primary key` to alias its rowid. */
function autoIdType(dialect: Dialect) {
  return dialect === 'mysql' ? 'bigint' : 'integer'
}

/** The columns a listing may be sorted by, each with its index (0002; a later sortable field gets a migration of its own). */
const sortIndexColumns = [
  'id', 'emp_id', 'created', 'custno', 'disp_group', 'source_id', 'location', 'email', 'first_name', 'last_name',
  'nick_name', 'gender', 'dept', 'title', 'birthday', 'hire_date', 'term_date', 'date_last', 'date_edit',
] as const

/** Versioned migrations of the people plugin's tables. Append new ones; never edit an applied one. */
export const peopleMigrations: Migrations = {
  '0001-people': {
    async up(db, dialect) {
      await createTable(db, dialect, 'people')
        .addColumn('id', autoIdType(dialect), (c) => c.primaryKey().autoIncrement())
        .addColumn('parent', 'bigint', (c) => c.notNull())
        .addColumn('custno', 'bigint', (c) => c.notNull())
        .addColumn('emp_id', 'varchar(64)')
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('disp_group', 'varchar(100)')
        .addColumn('source_id', 'varchar(100)')
        .addColumn('location', 'varchar(100)')
        .addColumn('email', 'varchar(255)')
        .addColumn('first_name', 'varchar(100)')
        .addColumn('last_name', 'varchar(100)')
        .addColumn('nick_name', 'varchar(100)')
        .addColumn('phone', 'varchar(50)')
        .addColumn('web', 'varchar(1024)')
        .addColumn('photo', 'varchar(1024)')
        .addColumn('has_photo', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('gender', 'varchar(1)', (c) => c.notNull().defaultTo('U'))
        .addColumn('dept', 'varchar(100)')
        .addColumn('title', 'varchar(200)')
        .addColumn('birthday', 'varchar(10)')
        .addColumn('hire_date', 'varchar(10)')
        .addColumn('term_date', 'varchar(10)')
        .addColumn('skip', 'varchar(100)')
        .addColumn('date_last', 'bigint')
        .addColumn('date_edit', 'bigint', (c) => c.notNull())
        .addColumn('seen_import', 'bigint')
        .execute()
      // The missing-photo page of a key bound to one customer: equality on the first
      // four columns, then already in the default order (LastName, FirstName, Id).
      await db.schema.createIndex('people_missing_by_custno').on('people')
        .columns(['parent', 'custno', 'deleted', 'has_photo', 'last_name', 'first_name', 'id']).execute()
      // The same for a parent-wide key (Custno 0), which sees every customer of its parent.
      await db.schema.createIndex('people_missing_by_parent').on('people')
        .columns(['parent', 'deleted', 'has_photo', 'last_name', 'first_name', 'id']).execute()
      // The list routes (deleted people included when asked), in the default order.
      await db.schema.createIndex('people_by_name').on('people')
        .columns(['parent', 'custno', 'last_name', 'first_name', 'id']).execute()
      // Imports upsert on Source_Id inside one customer; NULLs (people made by hand) may repeat.
      await db.schema.createIndex('people_source_id').unique().on('people')
        .columns(['parent', 'custno', 'source_id']).execute()

      await createTable(db, dialect, 'people_imports')
        .addColumn('id', autoIdType(dialect), (c) => c.primaryKey().autoIncrement())
        .addColumn('parent', 'bigint', (c) => c.notNull())
        .addColumn('custno', 'bigint', (c) => c.notNull())
        .addColumn('key_id', 'bigint', (c) => c.notNull())
        .addColumn('started', 'bigint', (c) => c.notNull())
        .addColumn('finished', 'bigint')
        .addColumn('batches', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('added', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('changed', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('unchanged', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('rejected', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('terminated', 'integer', (c) => c.notNull().defaultTo(0))
        .execute()

      await createTable(db, dialect, 'people_import_rejections')
        .addColumn('import_id', 'bigint', (c) => c.notNull())
        .addColumn('batch', 'integer', (c) => c.notNull())
        .addColumn('row_no', 'integer', (c) => c.notNull())
        .addColumn('source_id', 'varchar(100)')
        .addColumn('reason', 'varchar(500)', (c) => c.notNull())
        .addPrimaryKeyConstraint('people_import_rejections_pk', ['import_id', 'batch', 'row_no'])
        .execute()
    },
  },
  '0002-people-sort-indexes': {
    // One index per sortable field, (parent, field, id): it serves that sort either way
    // (Id runs the way the field does) for a parent-wide key and, filtering Custno on
    // the way, for a key bound to one customer. The columns after id never change the
    // order (id is unique); they let the listing's own conditions (Custno, Deleted, the
    // missing photo) be checked in the index, so a page number's anchor (an OFFSET walk)
    // reads the index alone, and MySQL prefers walking it in order to sorting another.
    // The default LastName,FirstName of the list routes gets one such index of its own,
    // which replaces 0001's people_by_name (parent, custno, ...): it served one customer only.
    async up(db, dialect) {
      const filtered = ['custno', 'deleted', 'has_photo']
      for (const column of sortIndexColumns) {
        const leading = column === 'id' ? ['parent', 'id'] : ['parent', column, 'id']
        await db.schema.createIndex(`people_sort_${column}`).on('people').columns([...leading, ...filtered.filter((name) => name !== column)]).execute()
      }
      await db.schema.createIndex('people_sort_name').on('people').columns(['parent', 'last_name', 'first_name', 'id', ...filtered]).execute()
      // The missing-photo page across customers, with Custno in the index: it serves a
      // key of one customer too, so 0001's people_missing_by_custno goes (one index less
      // to write on every import), like people_by_name.
      await db.schema.createIndex('people_missing').on('people')
        .columns(['parent', 'deleted', 'has_photo', 'last_name', 'first_name', 'id', 'custno']).execute()
      for (const replaced of ['people_by_name', 'people_missing_by_custno', 'people_missing_by_parent']) {
        const dropping = db.schema.dropIndex(replaced)
        await (dialect === 'mysql' ? dropping.on('people') : dropping).execute()
      }
    },
  },
  '0003-people-stored-record': {
    // Each person's record as JSON text, rendered when the person is written, so a
    // listing sends it as it is (storedRecord.ts; on SQLite). The people already there
    // are rendered now; a later change to the record's fields sets the column NULL and
    // renders again.
    async up(db, dialect) {
      await db.schema.alterTable('people').addColumn('record_text', 'text').execute()
      await storedRecords(dialect).renderStale(db, null)
    },
  },
  '0004-people-photos': {
    // Uploaded images move from each process's data folder into the shared database:
    // behind a load balancer every host must serve every photo (D16). Photos stored by
    // earlier versions stay files and are still served from the data folder (photoAnswer.ts).
    async up(db, dialect) {
      await createTable(db, dialect, 'people_photos')
        .addColumn('id', autoIdType(dialect), (c) => c.primaryKey().autoIncrement())
        .addColumn('location', 'varchar(255)', (c) => c.notNull().unique())
        // 16 MiB on MySQL: an image is at most 5 MiB (photos.ts maxPhotoBytes).
        .addColumn('image', dialect === 'mysql' ? sql`mediumblob` : 'blob', (c) => c.notNull())
        .addColumn('created', 'bigint', (c) => c.notNull())
        .execute()
    },
  },
}
