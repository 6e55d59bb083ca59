/**
 * Issue 12, item 8: protections that a single-line mutation of the security code broke
 * while every other test still passed. Each case below names the mutation it catches
 * (SECURITY.md, "Mutations the suite catches"). Over real HTTP, SQLite and MariaDB.
 */
import t from 'tap'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { probePlugin } from './helpers/probePlugin.ts'
import { insertKey, keyTestGroups, tenantKey, type TestKey } from './helpers/keys.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'
import { createGroup } from '../kernel/boot/bootstrap.ts'

const log = { detailDays: 7, recordDays: 30, batchSize: 500, flushMs: 20, queueMax: 20000, purgeEveryMs: 60000, purgeBatch: 1000 }

function readLog(service: Service, id: number | string | null, key: TestKey) {
  return service.call('POST', '/Api/Read/Log', { key, body: { LogRequestId: Number(id) } })
}

/** Waits until the call log has written record `id` to its table (the queue is empty of it). */
async function flushed(service: Service, id: number): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const row = await service.kernel.database.db.selectFrom('api_log').select('id').where('id', '=', id).executeTakeFirst()
    if (row) return
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`record ${id} was never written`)
}

t.test('verifySignature under a fixed Require_Hash: only the whole digest, in hex, is accepted', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })
    // Mutations caught: a prefix of the digest accepted (length check dropped); the hex
    // check dropped (Buffer.from(hex) stops at the first non-hex character).
    for (const method of [1, 3, 5] as const) {
      const key = await insertKey(service, { require_hash: method })
      const headers = signedHeaders(key, 'GET', '/Probe/Echo', undefined, { hashMethod: method })
      const send = (hmac: string) => fetch(`${service.base}/Probe/Echo`, { headers: { ...headers, 'x-apihmac': hmac } })
      const full = headers['x-apihmac']
      t.equal((await send(full)).status, 200, `method ${method}: the whole digest`)
      for (const length of [2, full.length / 2, full.length - 2]) {
        const truncated = await send(full.slice(0, length))
        t.equal(truncated.status, 401, `method ${method}: the first ${length} hex digits are refused`)
        t.equal(await truncated.text(), 'Error: Signature (x-apihmac) does not match.')
      }
      t.equal((await send(full + 'zz')).status, 401, `method ${method}: the digest followed by non-hex text`)
      t.equal((await send(full + '00')).status, 401, `method ${method}: the digest followed by one more byte`)
      t.equal((await send(full.slice(0, -2) + 'zz')).status, 401, `method ${method}: the last byte replaced by non-hex text`)
    }
  }),
)

t.test('the signature memo: a verified signature does not open another request', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })
    const key = await insertKey(service)
    const body = JSON.stringify({ Name: 'x' })
    const signed = signedHeaders(key, 'POST', '/Probe/Body', body)
    const headers = { ...signed, 'content-type': 'application/json' }
    const send = (sent: string, changes: Record<string, string> = {}) => fetch(`${service.base}/Probe/Body`, { method: 'POST', headers: { ...headers, ...changes }, body: sent })
    t.equal((await send(body)).status, 200, 'the signed request itself')
    t.equal((await send(body)).status, 200, 'the same request again, inside its window (reuse within the second is allowed)')
    // Mutation caught: the memo compares the signature only, not what it covered.
    const otherBody = await send(JSON.stringify({ Name: 'y' }))
    t.equal(otherBody.status, 401, 'the verified signature over another body')
    t.equal(await otherBody.text(), 'Error: Signature (x-apihmac) does not match.')
    // Mutation caught: the memo compares what was covered only, not the signature sent.
    const full = signed['x-apihmac']
    const forged = full.slice(0, -1) + (full.endsWith('0') ? '1' : '0')
    t.equal((await send(body, { 'x-apihmac': forged })).status, 401, 'the same request with a changed signature')
    t.equal((await send(body)).status, 200, 'the right signature still works after refusals')
  }),
)

t.test('POST /Api/Read/Log: another key cannot read a record once it is written to the table', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin], config: { log } })
    const owner = await insertKey(service)
    const other = await insertKey(service)
    const call = await service.call('GET', '/Probe/Echo', { key: owner, headers: { 'x-LogLevel': '2' } })
    t.equal(call.status, 200)
    const id = Number(call.headers.get('x-requestid'))
    await flushed(service, id)
    // Mutation caught: the stored-record query without `key_id = caller`.
    const othersRead = await readLog(service, id, other)
    t.equal(othersRead.status, 404)
    t.equal(othersRead.text, 'Error: No log record with that LogRequestId for this key.')
    const ownRead = await readLog(service, id, owner)
    t.equal(ownRead.status, 200)
    t.equal(ownRead.json.Api_Function, '/Probe/Echo')
  }),
)

t.test('POST /Api/Read/Log: the response cache is partitioned per key', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin], config: { log } })
    const owner = await insertKey(service)
    const other = await insertKey(service)
    const call = await service.call('GET', '/Probe/Echo', { key: owner, headers: { 'x-LogLevel': '2' } })
    const id = Number(call.headers.get('x-requestid'))
    const first = await readLog(service, id, owner)
    t.equal(first.status, 200)
    const again = await readLog(service, id, owner)
    t.equal(again.headers.get('x-cache'), 'HIT', "the owner's second read comes from the cache")
    // Mutation caught: one shared partition instead of the key's own.
    const othersRead = await readLog(service, id, other)
    t.equal(othersRead.status, 404, 'another key sending the same body does not get the cached record')
    t.equal(othersRead.text, 'Error: No log record with that LogRequestId for this key.')
    t.equal(othersRead.headers.get('x-cache'), null)
  }),
)

t.test('X-Forwarded-Proto is believed only from a configured proxy, also when one is configured', (t) =>
  forEachDatabase(t, async (t, kind) => {
    // The configured proxy is not the address the test calls from (127.0.0.1).
    const service = await startService(t, { kind, plugins: [probePlugin], config: { trustProxy: ['10.11.12.13'] } })
    const httpsKey = await insertKey(service, { require_https: 1 })
    // Mutation caught: the peer check dropped once any proxy is configured.
    const forged = await service.call('GET', '/Probe/Echo', { key: httpsKey, headers: { 'x-forwarded-proto': 'https' } })
    t.equal(forged.status, 403)
    t.equal(forged.text, 'Error: HTTPS is required for this key or path.')
  }),
)

t.test('Is_Public paths: no day-code route without credentials, no half-sent credentials', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })
    // An operator marks a day-code route public (say, by a too wide `--public` path).
    await createGroup(service.kernel.database.db, { name: 'Public day-code route', paths: [{ path: '/Probe/Today', displayName: 'public by mistake', isPublic: 1 }] })
    service.kernel.services.keys.accessChanged()
    // Mutation caught: the anonymous path without the route's day-code condition.
    const anonymous = await fetch(`${service.base}/Probe/Today`, { method: 'POST' })
    t.equal(anonymous.status, 401, 'a route that needs the day code is never served without credentials')
    t.equal(await anonymous.text(), 'Error: Missing credentials: x-apikey, x-apidate and x-apihmac are required.')
    t.equal((await service.call('POST', '/Probe/Today', { today: true })).status, 200, 'with a key and the day code it works')

    // Mutation caught: credentials without x-apikey served as an anonymous call.
    const date = new Date().toUTCString()
    for (const [name, headers] of [['x-apidate', { 'x-apidate': date }], ['x-apihmac', { 'x-apihmac': 'ab'.repeat(32) }], ['x-apitoday', { 'x-apitoday': service.today() }]] as const) {
      const partial = await fetch(`${service.base}/Probe/Public`, { headers })
      t.equal(partial.status, 401, `${name} without x-apikey on a public path`)
      t.equal(await partial.text(), 'Error: Missing credential x-apikey.')
    }
    t.equal((await fetch(`${service.base}/Probe/Public`)).status, 200, 'no credentials at all: the public path answers')
  }),
)

t.test('POST /Api/Edit/Key: never the caller itself, and a group change touches only the edited key', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const groups = await keyTestGroups(service)
    const db = service.kernel.database.db
    const create = async (name: string) => {
      const answer = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: name, GroupId: groups.aclReader, Require_Https: 0 } })
      t.equal(answer.status, 200, answer.text)
      return { id: answer.json.Id as number, apiKey: answer.json.Api_Key as string, secret: answer.json.Api_Secret as string }
    }
    const first = await create('First')
    const second = await create('Second')
    // Mutation caught: the group replacement deleting by a condition wider than this key.
    const edited = await service.call('POST', '/Api/Edit/Key', { today: true, body: { KeyId: first.id, GroupId: groups.people } })
    t.equal(edited.status, 200, edited.text)
    const groupsOf = async (keyId: number) =>
      (await db.selectFrom('api_key_groups').select('group_id').where('key_id', '=', keyId).orderBy('group_id').execute()).map((row) => Number(row.group_id))
    t.same(await groupsOf(first.id), [groups.people], 'the edited key holds the new group')
    t.same(await groupsOf(second.id), [groups.aclReader], 'a key created later keeps its groups')
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: second })).status, 200, 'and still calls its path')
    t.equal((await service.call('GET', '/Api/Read/Acl', { key: first })).status, 403, 'the edited key lost the path')

    // A key recorded as its own creator (a hand edit, an import): still never edits itself (D9).
    // Mutation caught: the edit's `id <> editor` condition dropped.
    const selfMade = await insertKey(service, { display_name: 'Self made' }, [groups.keyAdmin, groups.aclReader])
    await db.updateTable('api_keys').set({ created_by: selfMade.id }).where('id', '=', selfMade.id).execute()
    service.kernel.services.keys.changed(selfMade.id)
    const itself = await service.call('POST', '/Api/Edit/Key', { key: selfMade, today: true, body: { KeyId: selfMade.id, Display_Name: 'Renamed' } })
    t.equal(itself.status, 404)
    t.equal(itself.text, 'Error: Key not found.')
    const row = await db.selectFrom('api_keys').select('display_name').where('id', '=', selfMade.id).executeTakeFirstOrThrow()
    t.equal(row.display_name, 'Self made', 'nothing changed')
  }),
)

t.test('people: a customer key never sees the same Custno of another Parent', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const mineKey = await tenantKey(service, 1, 7)
    const theirKey = await tenantKey(service, 2, 7)
    const theirs = await service.call('POST', '/People/Update/OneChange', { key: theirKey, body: { FirstName: 'Other', LastName: 'Parent', Source_Id: 'P2-1' } })
    t.equal(theirs.status, 200, theirs.text)
    t.match(theirs.json, { Parent: 2, Custno: 7 })
    const mine = await service.call('POST', '/People/Update/OneChange', { key: mineKey, body: { FirstName: 'Own', LastName: 'Person', Source_Id: 'P1-1' } })
    t.equal(mine.status, 200, mine.text)
    // Mutation caught: the customer scope without its Parent condition.
    const listed = await service.call('GET', '/People/Read/Missing', { key: mineKey })
    t.equal(listed.status, 200)
    t.same(listed.json.People.map((person: { Id: number }) => person.Id), [mine.json.Id], 'Parent 1 / Custno 7 lists only its own person')
    const theirListing = await service.call('GET', '/People/Read/Missing', { key: theirKey })
    t.same(theirListing.json.People.map((person: { Id: number }) => person.Id), [theirs.json.Id], 'and Parent 2 / Custno 7 only its own')
    const change = await service.call('POST', '/People/Update/OneChange', { key: mineKey, body: { Id: theirs.json.Id, Title: 'Hacked' } })
    t.equal(change.status, 404)
    t.equal(change.text, `Error: Person ${theirs.json.Id} not found.`)
    const remove = await service.call('POST', '/People/Update/OneRemove', { key: mineKey, body: { Id: theirs.json.Id } })
    t.equal(remove.status, 404)
    const stored = await service.call('POST', '/people/read/list', { key: theirKey, body: { IncludeDeleted: 1 } })
    t.match(stored.json.People, [{ Id: theirs.json.Id, Title: '', Deleted: 0 }], 'their person is unchanged')
  }),
)

t.test('people imports stay inside the scope that started them', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const customer7 = await tenantKey(service, 1, 7)
    const customer8 = await tenantKey(service, 1, 8)
    const otherParent7 = await tenantKey(service, 2, 7)
    const theirs = await service.call('POST', '/People/Update/OneChange', { key: otherParent7, body: { FirstName: 'Theirs', LastName: 'Original', Source_Id: 'S-1' } })
    t.equal(theirs.status, 200, theirs.text)

    const importId = (await service.call('POST', '/people/update/importinit', { key: customer7, body: {} })).json.ImportId
    t.type(importId, 'number')
    // Mutation caught: openImport without its Custno condition (another customer of the same Parent continues it).
    for (const [path, body] of [
      ['/people/update/importmass', { ImportId: importId, People: [{ Source_Id: 'S-9', LastName: 'Intruder' }] }],
      ['/people/update/importterm', { ImportId: importId }],
    ] as const) {
      const refused = await service.call('POST', path, { key: customer8, body })
      t.equal(refused.status, 404, `${path} by another customer of the same Parent`)
      t.equal(refused.text, `Error: Import ${importId} not found.`)
    }

    // Mutation caught: the batch's lookup of existing people without the scope (same Custno and Source_Id under another Parent).
    const batch = await service.call('POST', '/people/update/importmass', { key: customer7, body: { ImportId: importId, People: [{ Source_Id: 'S-1', FirstName: 'Mine', LastName: 'Imported' }] } })
    t.equal(batch.status, 200, batch.text)
    const db = service.kernel.database.db.withTables<{ people: { id: number; parent: number; custno: number; source_id: string; last_name: string } }>()
    const rows = await db.selectFrom('people').select(['id', 'parent', 'custno', 'last_name']).where('source_id', '=', 'S-1').orderBy('id').execute()
    t.same(rows.map((row) => [Number(row.parent), Number(row.custno), row.last_name]), [[2, 7, 'Original'], [1, 7, 'Imported']], "the other Parent's person is untouched; ours is new")
    t.equal((await service.call('POST', '/people/update/importterm', { key: customer7, body: { ImportId: importId } })).status, 200)
    const after = await service.call('POST', '/people/read/list', { key: otherParent7, body: {} })
    t.match(after.json.People, [{ Id: theirs.json.Id, LastName: 'Original', TermDate: '' }], "importterm left the other Parent's people alone")
  }),
)

t.test('a sealed secret copied onto another key does not open it', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })
    const known = await insertKey(service)
    const target = await insertKey(service)
    const db = service.kernel.database.db
    // Someone who can write the database but lacks the master key copies the sealed
    // secret of a key whose secret they know onto the key they want to use.
    const { secret_enc } = await db.selectFrom('api_keys').select('secret_enc').where('id', '=', known.id).executeTakeFirstOrThrow()
    await db.updateTable('api_keys').set({ secret_enc }).where('id', '=', target.id).execute()
    service.kernel.services.keys.changed(target.id)
    // Mutation caught: the secret sealed without its Api_Key as context (AES-GCM additional data).
    const answer = await service.call('GET', '/Probe/Echo', { key: { apiKey: target.apiKey, secret: known.secret } })
    t.equal(answer.status, 500, 'refused as a fault of the store, never served')
    t.equal(answer.text, 'Error: Internal error.', 'and the answer reveals nothing')
    t.equal((await service.call('GET', '/Probe/Echo', { key: known })).status, 200, 'the known key itself still works')
  }),
)

t.test('an ACL path without * covers that path only, not longer ones', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, plugins: [probePlugin] })
    const group = await createGroup(service.kernel.database.db, { name: 'Deep only', paths: [{ path: '/Probe/Deep', displayName: 'the Deep route itself' }] })
    const key = await insertKey(service, {}, [group])
    t.equal((await service.call('GET', '/Probe/Deep', { key })).status, 200, 'the path itself')
    // Mutation caught: an exact ACL path matching every path that starts with it.
    const deeper = await service.call('GET', '/Probe/Deep/Level/Three', { key })
    t.equal(deeper.status, 403, 'a deeper route is not covered')
    t.equal(deeper.text, 'Error: Your ACL does not allow /Probe/Deep/Level/Three.')
  }),
)
