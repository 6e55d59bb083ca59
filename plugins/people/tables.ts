import type { Generated } from '../../kernel/sdk.ts'

/**
 * The people plugin's own tables, as Kysely sees them. The plugin widens the kernel's
 * handle with `kernel.db.withTables<PeopleTables>()`; the kernel never reads these.
 *
 * Storage conventions (the same as the kernel's):
 * - date-times (created, date_edit, date_last) are epoch milliseconds, so both engines
 *   compare them alike; answers show them as HTTP-dates (D9);
 * - calendar dates (birthday, hire_date, term_date) are `YYYY-MM-DD` text;
 * - an absent text value is NULL; answers show it as "" (interface 2.4 types them string).
 */
export type PeopleTables = {
  people: PeopleTable
  people_imports: PeopleImportsTable
  people_import_rejections: PeopleImportRejectionsTable
  people_photos: PeoplePhotosTable
}

/**
 * Uploaded images (OnePhoto), in the database every process shares (D16), so any
 * process serves any photo. `location` is the person's Photo value (photos.ts).
 */
export interface PeoplePhotosTable {
  id: Generated<number>
  location: string
  image: Buffer
  created: number
}

export interface PeopleTable {
  id: Generated<number>
  parent: number
  custno: number
  emp_id: string | null
  created: number
  deleted: Generated<number>
  disp_group: string | null
  source_id: string | null
  location: string | null
  email: string | null
  first_name: string | null
  last_name: string | null
  nick_name: string | null
  phone: string | null
  web: string | null
  photo: string | null
  /**
   * 1 when `photo` is not empty. Kept beside photo so the missing-photo listing can be
   * served by an index (a 1024-character photo column cannot be in a MySQL index).
   * Every write goes through `columnsFromInput`, which keeps the two in step.
   */
  has_photo: Generated<number>
  gender: Generated<string>
  dept: string | null
  title: string | null
  birthday: string | null
  hire_date: string | null
  term_date: string | null
  skip: string | null
  date_last: number | null
  date_edit: number
  /** The newest import that delivered this person; importterm of import N terminates those below N (import.ts finishImport). */
  seen_import: number | null
  /**
   * The person's record (interface 2.4) as JSON text after its Id, rendered whenever the
   * person is written, so a listing sends it as it is (storedRecord.ts). NULL: not yet rendered.
   */
  record_text: string | null
}

export interface PeopleImportsTable {
  id: Generated<number>
  parent: number
  custno: number
  key_id: number
  started: number
  finished: number | null
  batches: Generated<number>
  added: Generated<number>
  changed: Generated<number>
  unchanged: Generated<number>
  rejected: Generated<number>
  terminated: Generated<number>
}

export interface PeopleImportRejectionsTable {
  import_id: number
  batch: number
  row_no: number
  source_id: string | null
  reason: string
}
