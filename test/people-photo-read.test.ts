/**
 * GET /People/Read/Photo?Id=N (D14): the bytes OnePhoto stored, with their content type,
 * an ETag and Cache-Control: private; If-None-Match answers 304 with no body; the same
 * 404 for another tenant's person, a person whose Photo is only a location, and no person.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'
import { insertKey, tenantKey } from './helpers/keys.ts'
import { signedHeaders } from '../kernel/auth/signature.ts'

const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64')
const jpeg = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.from('JFIF rest of a jpeg')])

t.test('Photo', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    const person = (await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Pat', LastName: 'Photo' } })).json
    const stored = await service.call('POST', '/People/Update/OnePhoto', { body: { Id: person.Id, Image: png.toString('base64') } })
    t.equal(stored.status, 200)
    const hash = /-([0-9a-f]{16})\.png$/.exec(stored.json.Photo)![1]

    const photo = await service.call('GET', `/People/Read/Photo?Id=${person.Id}`)
    t.equal(photo.status, 200)
    t.equal(photo.headers.get('content-type'), 'image/png')
    t.equal(photo.headers.get('etag'), `"${hash}"`, 'the ETag is the content hash the file name carries')
    t.equal(photo.headers.get('cache-control'), 'private')
    t.equal(photo.headers.get('x-content-type-options'), 'nosniff')
    // Read as bytes, not text.
    const raw = await fetch(`${service.base}/People/Read/Photo?Id=${person.Id}`, { headers: signedHeaders(service.admin, 'GET', `/People/Read/Photo?Id=${person.Id}`) })
    t.same(Buffer.from(await raw.arrayBuffer()), png, 'the very bytes')
    t.equal(raw.headers.get('content-length'), String(png.length))
    t.match(photo.headers.get('x-requestid'), /^\d+$/, 'an authenticated call like any other')

    for (const format of ['xml', 'csv', 'json']) {
      const answer = await service.call('GET', `/People/Read/Photo?Id=${person.Id}&format=${format}`)
      t.equal(answer.headers.get('content-type'), 'image/png', `?format=${format} still answers the image`)
    }

    const etag = photo.headers.get('etag')!
    for (const ifNoneMatch of [etag, `W/${etag}`, `"0000000000000000", ${etag}`, '*']) {
      const notModified = await service.call('GET', `/People/Read/Photo?Id=${person.Id}`, { headers: { 'if-none-match': ifNoneMatch } })
      t.equal(notModified.status, 304, `If-None-Match: ${ifNoneMatch}`)
      t.equal(notModified.text, '', 'no body')
      t.equal(notModified.headers.get('etag'), etag)
      t.equal(notModified.headers.get('cache-control'), 'private')
      t.equal(notModified.headers.get('content-length'), null, 'no Content-Length: 0 standing for the image (RFC 9110 15.4.5)')
    }
    const changed = await service.call('GET', `/People/Read/Photo?Id=${person.Id}`, { headers: { 'if-none-match': '"0000000000000000"' } })
    t.equal(changed.status, 200, 'another ETag: the image')

    // A new upload: a new ETag, and the old one no longer answers 304.
    t.equal((await service.call('POST', '/People/Update/OnePhoto', { body: { Id: person.Id, Image: jpeg.toString('base64') } })).status, 200)
    const replaced = await service.call('GET', `/People/Read/Photo?Id=${person.Id}`, { headers: { 'if-none-match': etag } })
    t.equal(replaced.status, 200)
    t.equal(replaced.headers.get('content-type'), 'image/jpeg')
    t.not(replaced.headers.get('etag'), etag)

    const missingText = (id: number) => `Error: No stored image for person ${id}.`
    const stranger = await tenantKey(service, 3, 0)
    const foreign = await service.call('GET', `/People/Read/Photo?Id=${person.Id}`, { key: stranger })
    t.equal(foreign.status, 404, "another tenant's person")
    t.equal(foreign.text, missingText(person.Id))
    const sameParentOtherCustomer = await insertKey(service, { parent: 1, custno: 5 })
    t.equal((await service.call('GET', `/People/Read/Photo?Id=${person.Id}`, { key: sameParentOtherCustomer })).status, 404, 'another customer of the parent')

    const located = (await service.call('POST', '/People/Update/OneChange', { body: { LastName: 'Linked', Photo: 'https://intranet.example/x.jpg' } })).json
    const onlyLocation = await service.call('GET', `/People/Read/Photo?Id=${located.Id}`)
    t.equal(onlyLocation.status, 404, 'a Photo that is only a location')
    t.equal(onlyLocation.text, missingText(located.Id))
    const none = await service.call('GET', '/People/Read/Photo?Id=987654')
    t.equal(none.status, 404)
    t.equal(none.text, missingText(987654))
    t.equal((await service.call('GET', '/People/Read/Photo')).status, 400, 'Id is required')
    const lowerCase = await service.call('GET', '/People/Read/Photo?id=10')
    t.equal(lowerCase.status, 400)
    t.equal(lowerCase.text, 'Error: id is not a known parameter.', 'parameter names are case-sensitive: the unknown name is named')
    const bad = await service.call('GET', '/People/Read/Photo?Id=abc')
    t.equal(bad.status, 400)
    t.match(bad.text, /^Error: /)
    t.equal((await service.call('GET', `/people/read/photo?Id=${person.Id}`)).status, 200, 'any letter case')
  }),
)
