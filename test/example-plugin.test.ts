/**
 * The smallest complete plugin, as docs/writing-a-plugin.md builds it step by step:
 * its own table (migration), a default ACL group, a cached tenant-scoped read and a
 * write that drops the cache. Mounted directly with startService({ plugins: [...] }).
 */
import t from 'tap'
import { defineRoute, notFound, portableTable, type Generated, type Plugin } from '../kernel/sdk.ts'
import { issueKey } from '../kernel/auth/keyIssuer.ts'
import { forEachDatabase, startService } from './helpers/service.ts'

// 1. The plugin's tables, typed for Kysely.
type NoteTables = {
  notes: { id: Generated<number>; parent: number; custno: number; text: string; created: number }
}

// 2. Migrations: they get `db` and the dialect, for the column types that differ.

const examplePlugin: Plugin = {
  name: 'notes',
  migrations: {
    '0001-notes': {
      async up(db, dialect) {
        await portableTable(dialect, db.schema.createTable('notes'))
          .addColumn('id', dialect === 'mysql' ? 'bigint' : 'integer', (c) => c.primaryKey().autoIncrement())
          .addColumn('parent', 'bigint', (c) => c.notNull())
          .addColumn('custno', 'bigint', (c) => c.notNull())
          .addColumn('text', 'varchar(500)', (c) => c.notNull())
          .addColumn('created', 'bigint', (c) => c.notNull())
          .execute()
      },
    },
    // One DDL statement a migration: MySQL commits each by itself.
    '0002-notes-scope': {
      async up(db) {
        await db.schema.createIndex('notes_scope').on('notes').columns(['parent', 'custno', 'id']).execute()
      },
    },
  },
  // The change history (a plugin folder keeps it in history.json beside its index).
  history: [
    { Date: '2026-11-27', Version: '1.0.0', Kind: 'added', Breaking: 0, Operation: 'POST /Example/Read/Note', Description: 'One note of your tenant.' },
    { Date: '2026-11-27', Version: '1.0.0', Kind: 'added', Breaking: 0, Operation: 'POST /Example/Update/Note', Description: 'Writes a note of your tenant.' },
    { Date: '2026-11-27', Version: '1.0.0', Kind: 'added', Breaking: 0, Operation: 'GET /Example/Read/Notes', Description: "Your tenant's notes, oldest first." },
  ],
  // 3. Default groups: created at first start and given to the root admin key.
  defaultGroups: [{ name: 'Notes', paths: [{ path: '/Example/*', displayName: 'Read and write notes' }] }],
  // 4. Routes, given the kernel's services.
  setup(kernel) {
    const db = kernel.db.withTables<NoteTables>()
    const partition = (parent: number, custno: number) => `notes:${parent}:${custno}`
    return [
      defineRoute({
        method: 'GET',
        path: '/Example/Read/Notes',
        cache: { ttlSeconds: 3600, partition: (call) => partition(call.caller.parent, call.caller.custno) },
        xml: { root: 'Notes', item: 'Note' },
        csvColumns: ['Id', 'Text'],
        handler: async (call) => {
          const rows = await db.selectFrom('notes').select(['id', 'text'])
            .where('parent', '=', call.caller.parent).where('custno', '=', call.caller.custno).orderBy('id').execute()
          return rows.map((row) => ({ Id: Number(row.id), Text: row.text }))
        },
      }),
      defineRoute<{ Text: string }>({
        method: 'POST',
        path: '/Example/Update/Note',
        body: { type: 'object', additionalProperties: false, required: ['Text'], properties: { Text: { type: 'string', minLength: 1, maxLength: 500 } } },
        xml: { root: 'Note' },
        handler: async (call) => {
          const { parent, custno } = call.caller
          const inserted = await db.insertInto('notes').values({ parent, custno, text: call.body.Text, created: kernel.clock() }).executeTakeFirstOrThrow()
          kernel.cache.invalidate(partition(parent, custno))
          return { Id: Number(inserted.insertId), Text: call.body.Text }
        },
      }),
      defineRoute<{ Id: number }>({
        method: 'POST',
        path: '/Example/Read/Note',
        body: { type: 'object', additionalProperties: false, required: ['Id'], properties: { Id: { type: 'integer', minimum: 1 } } },
        xml: { root: 'Note' },
        handler: async (call) => {
          const row = await db.selectFrom('notes').select(['id', 'text']).where('id', '=', call.body.Id)
            .where('parent', '=', call.caller.parent).where('custno', '=', call.caller.custno).executeTakeFirst()
          if (!row) throw notFound(`Note ${call.body.Id} not found.`)
          return { Id: Number(row.id), Text: row.text }
        },
      }),
    ]
  },
}

t.test('a tiny example plugin mounted by the kernel', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [examplePlugin], config: {} })

    const acl = await service.call('GET', '/Api/Read/Acl')
    t.ok(acl.json.some((entry: { Path: string }) => entry.Path === '/Example/*'), 'its default group reached the root admin key')

    t.same((await service.call('GET', '/Example/Read/Notes')).json, [])
    const written = await service.call('POST', '/Example/Update/Note', { body: { Text: 'hello' } })
    t.equal(written.status, 200)
    t.match(written.json, { Id: Number, Text: 'hello' })
    const listed = await service.call('GET', '/example/read/notes')
    t.same(listed.json, [{ Id: written.json.Id, Text: 'hello' }], 'paths match case-insensitively')
    t.equal((await service.call('GET', '/Example/Read/Notes')).headers.get('x-cache'), 'HIT')
    await service.call('POST', '/Example/Update/Note', { body: { Text: 'world' } })
    const fresh = await service.call('GET', '/Example/Read/Notes')
    t.equal(fresh.headers.get('x-cache'), null, 'the write dropped the cached list')
    t.equal(fresh.json.length, 2)

    const xml = await service.call('GET', '/Example/Read/Notes?format=xml')
    t.match(xml.text, /<Notes>\s*<Note>\s*<Id>\d+<\/Id>\s*<Text>hello<\/Text>/)
    const csv = await service.call('GET', '/Example/Read/Notes?format=csv')
    t.match(csv.text, /^Id,Text\r\n\d+,hello\r\n\d+,world$/)

    const refused = await service.call('POST', '/Example/Update/Note', { body: { Text: '' } })
    t.equal(refused.status, 400)
    t.equal(refused.text, 'Error: Text must not be empty.')
    t.equal((await service.call('POST', '/Example/Update/Note', { body: { Text: 'x', Extra: 1 } })).text, 'Error: Extra is not a known field.')

    const db = service.kernel.database.db
    const groups = await db.selectFrom('api_key_groups').select('group_id').where('key_id', '=', service.admin.id).execute()
    const other = await issueKey(db, service.kernel.secrets, Date.now(), {
      display_name: 'Other tenant', parent: 2, custno: 0, require_https: 0, response_format: 'json',
    }, groups.map((group) => Number(group.group_id)))
    const key = { apiKey: other.apiKey, secret: other.secret }
    t.same((await service.call('GET', '/Example/Read/Notes', { key })).json, [], 'another tenant sees none of them')
    const emptyCsv = await service.call('GET', '/Example/Read/Notes?format=csv', { key })
    t.equal(emptyCsv.text, 'Id,Text\r\n', 'an empty CSV list is its header row (csvColumns)')
    t.equal((await service.call('POST', '/Example/Read/Note', { key, body: { Id: written.json.Id } })).status, 404)
    t.equal((await service.call('POST', '/Example/Read/Note', { body: { Id: written.json.Id } })).json.Text, 'hello')
  }),
)
