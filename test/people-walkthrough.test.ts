/**
 * Issue 5, "Done when", tried as a new user would, in each response format: import a
 * CSV of people, list who is missing a photo, upload one photo, list again and see
 * one fewer. Every call of the walk asks for the format with ?format=.
 */
import t from 'tap'
import Papa from 'papaparse'
import { forEachDatabase, startService } from './helpers/service.ts'

const roster = [
  'Source_Id,FirstName,LastName,Dept,Email',
  'HR-100,Grace,Hopper,Engineering,grace@example.com',
  'HR-101,Alan,Turing,Research,alan@example.com',
  'HR-102,Ada,Lovelace,Research,ada@example.com',
].join('\n')
const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64')

/** Reads what the walk needs (the total and the people's ids) from an answer in any format. */
function readListing(format: string, text: string, headers: Headers): { total: number; ids: number[]; lastNames: string[] } {
  if (format === 'json') {
    const answer = JSON.parse(text)
    return { total: answer.Total, ids: answer.People.map((p: { Id: number }) => p.Id), lastNames: answer.People.map((p: { LastName: string }) => p.LastName) }
  }
  if (format === 'xml') {
    const total = Number(/<Total>(\d+)<\/Total>/.exec(text)![1])
    return { total, ids: [...text.matchAll(/<Id>(\d+)<\/Id>/g)].map((m) => Number(m[1])), lastNames: [...text.matchAll(/<LastName>([^<]*)<\/LastName>/g)].map((m) => m[1]) }
  }
  const rows = Papa.parse<Record<string, string>>(text, { header: true, skipEmptyLines: true }).data
  return { total: Number(headers.get('x-total-count')), ids: rows.map((row) => Number(row.Id)), lastNames: rows.map((row) => row.LastName) }
}

t.test('import a CSV, list who is missing a photo, upload one, list again', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    for (const format of ['json', 'xml', 'csv'] as const) {
      await t.test(format, async (t) => {
        const contentType = { json: /^application\/json/, xml: /^application\/xml/, csv: /^text\/csv/ }[format]
        const call = (method: string, path: string, body?: unknown) => service.call(method, `${path}?format=${format}`, { body })

        const init = await call('POST', '/people/update/importinit', {})
        t.equal(init.status, 200)
        t.match(init.headers.get('content-type'), contentType)
        const importId = Number(format === 'json' ? init.json.ImportId : format === 'xml' ? /<ImportId>(\d+)</.exec(init.text)![1] : init.text.split(/\r?\n/)[1])
        t.ok(importId > 0, `${format}: an import id`)

        const batch = await call('POST', '/people/update/importmass', { ImportId: importId, Csv: roster })
        t.equal(batch.status, 200, batch.text)
        if (format === 'xml') t.match(batch.text, /<Added>3<\/Added>|<Unchanged>3<\/Unchanged>/)
        if (format === 'csv') t.match(batch.text, /^ImportId,Batch,Rows,Added,Changed,Unchanged,Rejected,Rejections\r\n/)

        const before = await call('GET', '/People/Read/Missing')
        t.equal(before.status, 200)
        t.match(before.headers.get('content-type'), contentType)
        const listed = readListing(format, before.text, before.headers)
        t.equal(listed.total, 3 - ['json', 'xml', 'csv'].indexOf(format), `${format}: everyone still without a photo`)
        t.same(listed.lastNames, [...listed.lastNames].sort(), 'sorted by LastName')
        if (format === 'xml') t.match(before.text, /^<\?xml version=.1\.0. encoding=.UTF-8.\?>\s*<People>\s*<Total>/)
        if (format === 'csv') {
          t.match(before.text, /^Id,Emp_Id,Created,Deleted,Parent,Custno,DispGroup,Source_Id,/)
          t.equal(before.headers.get('x-page'), '1 of 1')
        }

        const photo = await call('POST', '/People/Update/OnePhoto', { Id: listed.ids[0], Image: png.toString('base64') })
        t.equal(photo.status, 200, photo.text)
        t.match(photo.headers.get('content-type'), contentType)
        t.match(photo.text, /photos\/1\/0\/\d+-[0-9a-f]{16}\.png/, 'the stored photo location is answered')

        const after = await call('GET', '/People/Read/Missing')
        t.equal(after.headers.get('x-cache'), null, 'the photo dropped the cached listing')
        const relisted = readListing(format, after.text, after.headers)
        t.equal(relisted.total, listed.total - 1, `${format}: one fewer`)
        t.notOk(relisted.ids.includes(listed.ids[0]))

        const ended = await call('POST', '/people/update/importterm', { ImportId: importId })
        t.equal(ended.status, 200)
      })
    }
  }),
)
