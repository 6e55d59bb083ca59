/**
 * POST /People/Update/OnePhoto (D13): a location string, or a base64 image of at most
 * 5 MiB whose bytes must say JPEG, PNG or WebP, stored in the shared database (D16),
 * so every process and host serves it; files of earlier versions are still served.
 * A 5 MiB image is about 6.7 MiB of base64 JSON; the route takes up to 8 MiB, above
 * the service-wide 1 MiB default, which these tests keep.
 */
import t from 'tap'
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { forEachDatabase, startService, type Service } from './helpers/service.ts'
import { createKernel } from '../kernel/boot/kernel.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'

/** The stored image of a Photo location, or undefined. */
async function storedImage(service: Service, location: string): Promise<Buffer | undefined> {
  const row = await service.kernel.database.db.withTables<{ people_photos: { location: string; image: Buffer } }>()
    .selectFrom('people_photos').select('image').where('location', '=', location).executeTakeFirst()
  return row ? Buffer.from(row.image) : undefined
}

const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64')
const jpeg = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.from('JFIF rest of a jpeg')])
const webp = Buffer.concat([Buffer.from('RIFF'), Buffer.from([0x1a, 0, 0, 0]), Buffer.from('WEBPVP8 rest of a webp')])

t.test('OnePhoto', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const person = (await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Pat', LastName: 'Photo' } })).json
    const upload = (body: Record<string, unknown>) => service.call('POST', '/People/Update/OnePhoto', { body: { Id: person.Id, ...body } })

    const located = await upload({ Photo: 'https://intranet.example/pat.jpg' })
    t.equal(located.status, 200)
    t.equal(located.json.Photo, 'https://intranet.example/pat.jpg', 'a location is stored as given')

    const stored = new Map<string, string>()
    for (const [type, bytes, extension] of [['png', png, 'png'], ['jpeg', jpeg, 'jpg'], ['webp', webp, 'webp']] as const) {
      const answer = await upload({ Image: bytes.toString('base64') })
      t.equal(answer.status, 200, type)
      t.match(answer.json.Photo, new RegExp(`^photos/1/0/${person.Id}-[0-9a-f]{16}\\.${extension}$`), `${type} stored under photos/`)
      t.same(await storedImage(service, answer.json.Photo), bytes, `${type}: the very bytes`)
      stored.set(type, answer.json.Photo)
    }
    t.equal(await storedImage(service, stored.get('png')!), undefined, 'a replaced upload is removed')
    t.notOk(existsSync(join(service.config.dataDir, 'photos')), 'nothing is written to the data folder')
    t.equal((await upload({ Image: `data:image/png;base64,${png.toString('base64')}`, Type: 'image/png' })).status, 200, 'a data: URL and a matching Type')

    const before = (await upload({ Photo: 'kept.jpg' })).json
    const refusals: [Record<string, unknown>, RegExp][] = [
      [{ Image: Buffer.from('just some text, no image').toString('base64') }, /^Error: Image is not a JPEG, PNG or WebP image\.$/],
      [{ Image: Buffer.from('GIF89a....').toString('base64') }, /^Error: Image is not a JPEG, PNG or WebP image\.$/],
      [{ Image: Buffer.from('%PDF-1.7').toString('base64') }, /^Error: Image is not a JPEG, PNG or WebP image\.$/],
      [{ Image: '***not base64***' }, /^Error: Image must be base64 text\.$/],
      [{ Image: '' }, /^Error: Image must be base64 text\.$/],
      [{ Image: png.toString('base64'), Type: 'jpeg' }, /^Error: Type says jpeg but the image is png\.$/],
      [{ Image: png.toString('base64'), Type: 'gif' }, /^Error: Type must be one of jpeg, png, webp/],
      [{ Image: png.toString('base64'), Type: 'constructor' }, /^Error: Type must be one of jpeg, png, webp, got 'constructor'\.$/],
      [{ Image: png.toString('base64'), Type: '__proto__' }, /^Error: Type must be one of jpeg, png, webp, got '__proto__'\.$/],
      [{ Photo: 'x.jpg', Image: png.toString('base64') }, /^Error: Send either Photo/],
      [{}, /^Error: Send either Photo/],
      [{ Photo: 'x.jpg', Type: 'png' }, /^Error: Type describes Image/],
    ]
    for (const [body, message] of refusals) {
      const refused = await upload(body)
      t.equal(refused.status, 400, JSON.stringify(body).slice(0, 60))
      t.match(refused.text, message)
    }
    const after = (await service.call('POST', '/people/read/filtered', { body: { filter: `Id=${person.Id}` } })).json.People[0]
    t.equal(after.Photo, before.Photo, 'a refused upload changes nothing')

    const fiveMiB = Buffer.concat([png, Buffer.alloc(5 * 1024 * 1024 - png.length)])
    const largest = await upload({ Image: fiveMiB.toString('base64') })
    t.equal(largest.status, 200, 'exactly 5 MiB is accepted')
    const tooLarge = await upload({ Image: Buffer.concat([fiveMiB, Buffer.alloc(3)]).toString('base64') })
    t.equal(tooLarge.status, 400)
    t.match(tooLarge.text, /^Error: Image is larger than 5242880 bytes/)

    const missing = await service.call('POST', '/People/Update/OnePhoto', { body: { Id: 777777, Image: png.toString('base64') } })
    t.equal(missing.status, 404)
    const cleared = await upload({ Photo: null })
    t.equal(cleared.json.Photo, '', 'null clears the photo')
    t.equal(await storedImage(service, largest.json.Photo), undefined, 'and our image goes with it')
  }),
)

t.test("a client cannot make OnePhoto delete an image stored for another person or tenant", (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const { insertKey } = await import('./helpers/keys.ts')
    const other = await insertKey(service, { parent: 2, display_name: 'Tenant 2 admin' })
    const theirs = (await service.call('POST', '/People/Update/OneChange', { key: other, body: { FirstName: 'Their', LastName: 'Person' } })).json
    const theirPhoto = (await service.call('POST', '/People/Update/OnePhoto', { key: other, body: { Id: theirs.Id, Image: png.toString('base64') } })).json.Photo as string
    t.ok(await storedImage(service, theirPhoto))
    // Tenant 1 names tenant 2's stored file as its own person's Photo, then replaces it.
    const mine = (await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'My', LastName: 'Person' } })).json
    t.equal((await service.call('POST', '/People/Update/OnePhoto', { body: { Id: mine.Id, Photo: theirPhoto } })).status, 200)
    const ownJpeg = (await service.call('POST', '/People/Update/OnePhoto', { body: { Id: mine.Id, Image: jpeg.toString('base64') } })).json.Photo as string
    t.ok(await storedImage(service, theirPhoto), "the other tenant's image is still there")
    // Its own stored file is still replaced and removed as before.
    const ownWebp = (await service.call('POST', '/People/Update/OnePhoto', { body: { Id: mine.Id, Image: webp.toString('base64') } })).json.Photo as string
    t.match(ownWebp, new RegExp(`^photos/1/0/${mine.Id}-[0-9a-f]{16}\\.webp$`))
    t.equal(await storedImage(service, ownJpeg), undefined, 'the replaced own image is gone')
  }),
)

t.test('a photo uploaded through one host is served by every host on the same database (D16)', (t) =>
  forEachDatabase(t, async (t, kind) => {
    if (kind === 'sqlite') return void t.pass('SQLite: one database file, one host')
    const service = await startService(t, { kind })
    // A second host: its own data folder, the same database and master key.
    const otherDir = mkdtempSync(join(tmpdir(), 'keygate-host-b-'))
    const other = await createKernel({ config: { ...service.config, port: 0, dataDir: otherDir, masterKey: join(service.config.dataDir, 'master.key') }, report: () => undefined })
    t.teardown(async () => { await other.close(); rmSync(otherDir, { recursive: true, force: true }) })
    const { url } = await other.listen()
    const person = (await service.call('POST', '/People/Update/OneChange', { body: { LastName: 'Shared' } })).json
    t.equal((await service.call('POST', '/People/Update/OnePhoto', { body: { Id: person.Id, Image: png.toString('base64') } })).status, 200)
    const path = `/People/Read/Photo?Id=${person.Id}`
    const read = await fetch(url + path, { headers: signedHeaders(service.admin, 'GET', path) })
    t.equal(read.status, 200, 'served by the host that did not store it')
    t.same(Buffer.from(await read.arrayBuffer()), png)
  }),
)

t.test('a photo file stored by a version before 0.3.2 is still served, and removed when replaced', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const person = (await service.call('POST', '/People/Update/OneChange', { body: { LastName: 'Older' } })).json
    const location = `photos/1/0/${person.Id}-0123456789abcdef.jpg`
    mkdirSync(join(service.config.dataDir, 'photos', '1', '0'), { recursive: true })
    writeFileSync(join(service.config.dataDir, ...location.split('/')), jpeg)
    t.equal((await service.call('POST', '/People/Update/OnePhoto', { body: { Id: person.Id, Photo: location } })).status, 200)
    const read = await service.call('GET', `/People/Read/Photo?Id=${person.Id}`)
    t.equal(read.status, 200)
    t.equal(read.headers.get('content-type'), 'image/jpeg')
    t.equal((await service.call('POST', '/People/Update/OnePhoto', { body: { Id: person.Id, Image: png.toString('base64') } })).status, 200)
    t.notOk(existsSync(join(service.config.dataDir, ...location.split('/'))), 'the older file goes when the photo is replaced')
  }),
)

t.test('OnePhoto drops trailing white space from a location, as every field: "   " is no photo', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const person = (await service.call('POST', '/People/Update/OneChange', { body: { LastName: 'Spaces' } })).json
    const located = await service.call('POST', '/People/Update/OnePhoto', { body: { Id: person.Id, Photo: 'https://intranet.example/a.jpg \t\n' } })
    t.equal(located.status, 200, located.text)
    t.equal(located.json.Photo, 'https://intranet.example/a.jpg')
    t.equal((await service.call('GET', '/People/Read/Missing')).json.Total, 0)
    const blank = await service.call('POST', '/People/Update/OnePhoto', { body: { Id: person.Id, Photo: '   ' } })
    t.equal(blank.status, 200, blank.text)
    t.equal(blank.json.Photo, '', 'white space alone clears the photo')
    const missing = await service.call('GET', `/People/Read/Missing?filter=Id=${person.Id}`)
    t.equal(missing.json.Total, 1, 'and the person is missing a photo again')
  }),
)

t.test("a person's uploaded image goes whenever its Photo changes: after a move, by OneChange, by an import", (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const create = async (body: Record<string, unknown>) => (await service.call('POST', '/People/Update/OneChange', { body })).json as { Id: number }
    const upload = async (id: number, bytes = png) => {
      const answer = await service.call('POST', '/People/Update/OnePhoto', { body: { Id: id, Image: bytes.toString('base64') } })
      t.equal(answer.status, 200, answer.text)
      t.ok(await storedImage(service, answer.json.Photo), 'stored')
      return answer.json.Photo as string
    }

    // Stored under Custno 1, then moved to Custno 2 by the parent-wide key, then replaced.
    const moved = await create({ LastName: 'Moved', Custno: 1 })
    const beforeMove = await upload(moved.Id)
    t.match(beforeMove, new RegExp(`^photos/1/1/${moved.Id}-`))
    t.equal((await service.call('POST', '/People/Update/OneChange', { body: { Id: moved.Id, Custno: 2 } })).status, 200)
    t.equal((await service.call('POST', '/People/Update/OnePhoto', { body: { Id: moved.Id, Photo: 'https://intranet.example/m.jpg' } })).status, 200)
    t.equal(await storedImage(service, beforeMove), undefined, 'the image stored before the move is removed when replaced')

    const cleared = await create({ LastName: 'Cleared' })
    const clearedPhoto = await upload(cleared.Id)
    t.equal((await service.call('POST', '/People/Update/OneChange', { body: { Id: cleared.Id, Photo: '' } })).json.Photo, '')
    t.equal(await storedImage(service, clearedPhoto), undefined, 'OneChange clearing Photo removes the image')

    const relocated = await create({ LastName: 'Relocated' })
    const relocatedPhoto = await upload(relocated.Id)
    t.equal((await service.call('POST', '/People/Update/OneChange', { body: { Id: relocated.Id, Photo: 'https://intranet.example/r.jpg' } })).status, 200)
    t.equal(await storedImage(service, relocatedPhoto), undefined, 'OneChange changing Photo removes the image')
    const untouched = await create({ LastName: 'Untouched' })
    const untouchedPhoto = await upload(untouched.Id)
    t.equal((await service.call('POST', '/People/Update/OneChange', { body: { Id: untouched.Id, Dept: 'IT', Photo: untouchedPhoto } })).status, 200)
    t.ok(await storedImage(service, untouchedPhoto), 'a change that keeps Photo keeps the image')

    const imported = await create({ LastName: 'Imported', Source_Id: 'I1' })
    const kept = await create({ LastName: 'Kept', Source_Id: 'I2' })
    const importedPhoto = await upload(imported.Id)
    const keptPhoto = await upload(kept.Id, jpeg)
    const importId = (await service.call('POST', '/people/update/importinit', { body: {} })).json.ImportId
    const batch = await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, Csv: 'Source_Id,LastName,Photo\nI1,Imported,\n' } })
    t.match(batch.json, { Changed: 1 }, batch.text)
    t.equal(await storedImage(service, importedPhoto), undefined, 'an import row clearing Photo removes the image')
    const other = await service.call('POST', '/people/update/importmass', { body: { ImportId: importId, People: [{ Source_Id: 'I2', LastName: 'Kept', Dept: 'HR' }] } })
    t.match(other.json, { Changed: 1 }, other.text)
    t.ok(await storedImage(service, keptPhoto), 'an import row without Photo keeps the image')
  }),
)
