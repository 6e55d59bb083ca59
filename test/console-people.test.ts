/**
 * The console's People page in a real browser (issue 18): a 2,000-row CSV with 3 bad
 * rows is imported in batches with a progress bar; the report names the 3 rows by their
 * line in the file; the people are then listed; a missing photo is uploaded.
 */
import t from 'tap'
import { startService } from './helpers/service.ts'
import { groupNamed } from './helpers/keys.ts'
import { consoleUrl, screenshot, signIn, withBrowser } from './helpers/browser.ts'

const badRows = new Set([17, 1000, 1999])

function csvFile(): string {
  const lines = ['Source_Id,FirstName,LastName,Dept,HireDate']
  // Five years ago today (UTC, the tenant's zone here): the first row's work anniversary is today.
  const now = new Date()
  const hired = `${now.getUTCFullYear() - 5}-${String(now.getUTCMonth() + 1).padStart(2, '0')}-${String(now.getUTCDate()).padStart(2, '0')}`
  // Rows without LastName are refused by the import (Source_Id and LastName are required).
  for (let row = 1; row <= 2000; row++) lines.push(`E${row},First${row},${badRows.has(row) ? '' : `Last${row}`},Dept ${row % 7},${row === 1 ? hired : ''}`)
  return `${lines.join('\n')}\n`
}

t.test('a CSV import shows its progress and reports the bad rows', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const page = await browser.newPage()
  await signIn(page, service)
  await page.goto(consoleUrl(service, 'people'))
  await page.getByRole('heading', { name: 'People', level: 1 }).waitFor()
  const today = page.getByRole('region', { name: 'Today' })
  await today.getByText('No birthdays or anniversaries today.').waitFor()

  await page.getByLabel('CSV file').setInputFiles({ name: 'people.csv', mimeType: 'text/csv', buffer: Buffer.from(csvFile()) })
  await page.getByRole('button', { name: 'Import' }).click()
  const progress = page.locator('progress#import-progress')
  await progress.waitFor()
  t.equal(await progress.getAttribute('max'), '2000', 'the bar counts all 2,000 rows')
  const summary = page.getByTestId('import-summary')
  await summary.waitFor({ timeout: 60_000 })
  t.equal(await progress.getAttribute('value'), '2000', 'the bar is full')
  t.match(await summary.textContent(), /1997 added, 0 changed, 0 unchanged, 3 rejected/)
  const rejected = page.locator('tr.rejected-row')
  t.equal(await rejected.count(), 3, 'three rows reported')
  const rows = await rejected.evaluateAll((cells) => cells.map((row) => Number(row.querySelector('td')!.textContent)))
  t.same(rows, [...badRows], 'each by its row in the file')
  t.match(await rejected.first().textContent(), /E17.*LastName/, 'with its Source_Id and the reason')
  await screenshot(page, 'people-import')

  const listed = await service.call('POST', '/people/read/list', { body: {} })
  t.equal(listed.json.Total, 1997, 'the good rows are stored')
  await page.getByText('1997 people, page 1 of 40').waitFor()
  await today.getByText('First1 Last1: 5 years with us').waitFor()
  t.pass('Today follows the import without a reload')

  // A missing photo, uploaded from the page.
  const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64')
  const someone = page.getByLabel(/^Upload photo of /).first()
  await someone.setInputFiles({ name: 'photo.png', mimeType: 'image/png', buffer: png })
  await page.getByText(/Photo of .* uploaded\./).waitFor()
  const missing = await service.call('GET', '/People/Read/Missing')
  t.equal(missing.json.Total, 1996, 'one person fewer is missing a photo')
}))

t.test('every person missing a photo can be reached page by page and given one', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const lines = ['Source_Id,FirstName,LastName']
  for (let row = 1; row <= 45; row++) lines.push(`M${row},First${row},Last${String(row).padStart(2, '0')}`)
  const init = await service.call('POST', '/people/update/importinit', { body: {} })
  const imported = await service.call('POST', '/people/update/importmass', { body: { ImportId: init.json.ImportId, Csv: lines.join('\n') } })
  t.equal(imported.json.Added, 45, imported.text)
  const page = await browser.newPage()
  await signIn(page, service)
  await page.goto(consoleUrl(service, 'people'))
  const missing = page.getByRole('region', { name: /^Missing photos/ })
  await missing.getByText('Page 1 of 3').waitFor()
  t.equal(await missing.getByLabel(/^Upload photo of /).count(), 20, '20 a page')
  await missing.getByRole('button', { name: 'Next page of missing photos' }).click()
  await missing.getByText('Page 2 of 3').waitFor()
  await missing.getByRole('button', { name: 'Next page of missing photos' }).click()
  await missing.getByText('Page 3 of 3').waitFor()
  const uploads = missing.getByLabel(/^Upload photo of /)
  t.equal(await uploads.count(), 5, 'the last page holds the last 5')
  t.ok(await missing.getByRole('button', { name: 'Next page of missing photos' }).isDisabled(), 'no page after the last')

  // Everyone on the last page gets a photo: then that page is gone, and the one now last is shown.
  const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64')
  const given: string[] = []
  for (let left = 5; left > 0; left--) {
    const label = (await missing.locator('label.file-button > span').first().textContent())!.trim()
    given.push(label.replace(/^Upload photo of /, ''))
    await uploads.first().setInputFiles({ name: 'photo.png', mimeType: 'image/png', buffer: png })
    await missing.getByText(`Photo of ${given.at(-1)} uploaded.`).waitFor()
    await missing.getByRole('heading', { name: `Missing photos (${40 + left - 1})` }).waitFor()
  }
  await missing.getByText('Page 2 of 2').waitFor()
  t.equal(await uploads.count(), 20, 'the page now last, full')
  const stillMissing = await service.call('GET', '/People/Read/Missing?size=100')
  t.equal(stillMissing.json.Total, 40, 'five photos stored')
  const names = (stillMissing.json.People as { FirstName: string; LastName: string }[]).map((person) => `${person.FirstName} ${person.LastName}`)
  t.same(given.filter((person) => names.includes(person)), [], 'the people of the last page have theirs')
}))

t.test('refused rows are named by their physical line, as one importmass call of the file names them; so are repeated Source_Ids', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  // 600 rows: a blank line after row 100, a Title with a line break in row 300, bad rows either side and near a batch's end.
  // Repeated Source_Ids: row 560 repeats row 5 (another batch of 250), row 270 row 265 (with a trailing space, the same
  // Source_Id once stored); row 580 repeats row 50, which is refused (no LastName), so 580 is the one kept; row 590
  // repeats row 6 but is refused for its own fault first.
  const repeats = new Map([[560, 'L5'], [270, 'L265 '], [580, 'L50'], [590, 'L6']])
  const lines = ['Source_Id,FirstName,LastName,Title']
  for (let row = 1; row <= 600; row++) {
    lines.push(`${repeats.get(row) ?? `L${row}`},First${row},${[50, 249, 260, 500, 590].includes(row) ? '' : `Last${row}`},${row === 300 ? '"Head of\nThings"' : 'Staff'}`)
    if (row === 100) lines.push('')
  }
  const csv = `${lines.join('\n')}\n`
  const page = await browser.newPage()
  await signIn(page, service)
  await page.goto(consoleUrl(service, 'people'))
  await page.getByLabel('CSV file').setInputFiles({ name: 'people.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) })
  await page.getByRole('button', { name: 'Import' }).click()
  const summary = page.getByTestId('import-summary')
  await summary.waitFor({ timeout: 60_000 })
  t.equal(await page.locator('progress#import-progress').getAttribute('max'), '600', 'the bar counts the rows, not the lines')
  t.match(await summary.textContent(), /593 added, 0 changed, 0 unchanged, 7 rejected/)
  const reported = await page.locator('tr.rejected-row').evaluateAll((cells) => cells.map((row) => {
    const [line, sourceId, reason] = [...row.querySelectorAll('td')].map((cell) => cell.textContent)
    return { Row: Number(line), Source_Id: sourceId === '—' ? '' : sourceId, Reason: reason }
  }))
  t.same(reported.map((rejection) => rejection.Row), [50, 250, 261, 271, 502, 562, 592], 'the physical lines: the blank line and the line break count')
  t.match(reported.find((rejection) => rejection.Row === 562), { Source_Id: 'L5', Reason: "Source_Id 'L5' repeats row 5." }, 'a repeat in a later batch is refused, naming the file\'s row')
  t.match(reported.find((rejection) => rejection.Row === 271), { Source_Id: 'L265', Reason: "Source_Id 'L265' repeats row 266." }, 'one within a batch names the file\'s row too')
  const stored = async (sourceId: string) => ((await service.call('POST', '/people/read/list', { body: { filter: `Source_Id=${sourceId}` } })).json.People as { FirstName: string }[])[0]
  t.match(await stored('L5'), { FirstName: 'First5' }, 'the first row of a Source_Id is the person kept')
  t.match(await stored('L50'), { FirstName: 'First580' }, 'or the first good one')

  const init = await service.call('POST', '/people/update/importinit', { body: {} })
  const whole = await service.call('POST', '/people/update/importmass', { body: { ImportId: init.json.ImportId, Csv: csv } })
  // The file is the batch of one call: the console says "of the file" without saying so.
  const wholeReport = (whole.json.Rejections as { Reason: string }[]).map((rejection) => ({ ...rejection, Reason: rejection.Reason.replace(/ of this batch\.$/, '.') }))
  t.same(reported, wholeReport, 'what one importmass call of the whole file answers')
}))

t.test('a file the API would refuse whole is refused before anything is sent', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const lines = ['Source_Id,FirstName,LastName']
  for (let row = 1; row <= 600; row++) lines.push(row === 400 ? `Q${row},"Never closed,Last${row}` : `Q${row},First${row},Last${row}`)
  const csv = `${lines.join('\n')}\n`
  const init = await service.call('POST', '/people/update/importinit', { body: {} })
  const api = await service.call('POST', '/people/update/importmass', { body: { ImportId: init.json.ImportId, Csv: csv } })
  t.equal(api.status, 400)
  t.match(api.text, /starts on row 400 is never closed/, 'the API refuses the file whole')

  const page = await browser.newPage()
  await signIn(page, service)
  await page.goto(consoleUrl(service, 'people'))
  await page.getByLabel('CSV file').setInputFiles({ name: 'broken.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) })
  await page.getByRole('button', { name: 'Import' }).click()
  const error = page.getByRole('region', { name: 'Import people from CSV' }).getByRole('alert')
  await error.waitFor()
  t.match(await error.textContent(), /^Error: A quoted field that starts on row 400 is never closed.*nothing of the file was sent\./, 'the file\'s row')
  t.equal(await page.locator('progress#import-progress').count(), 0, 'no progress: nothing was sent')
  const listed = await service.call('POST', '/people/read/list', { body: {} })
  t.equal(listed.json.Total, 0, 'nobody was written')
  const next = await service.call('POST', '/people/update/importinit', { body: {} })
  t.equal(next.json.ImportId, init.json.ImportId + 1, 'no import was opened')
}))

t.test('a key that may read people but not change them is offered no upload and no import', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  t.equal((await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Ada', LastName: 'Lovelace' } })).status, 200)
  const groups = [await groupNamed(service, 'People directory readers'), await groupNamed(service, 'Operation list reader')]
  const made = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'People reader', GroupId: groups, Require_Https: 0 }, today: true })
  t.equal(made.status, 200, made.text)
  const reader = { id: made.json.Id as number, apiKey: made.json.Api_Key as string, secret: made.json.Api_Secret as string }
  t.equal((await service.call('POST', '/People/Update/OnePhoto', { key: reader, body: { Id: 1, Image: 'data:image/png;base64,AA==' } })).status, 403, 'the API refuses its upload')
  const page = await browser.newPage()
  await signIn(page, service, reader)
  await page.goto(consoleUrl(service, 'people'))
  const missing = page.getByRole('region', { name: /^Missing photos/ })
  await missing.getByText('Ada Lovelace', { exact: true }).waitFor()
  t.equal(await missing.getByLabel(/^Upload photo of /).count(), 0, 'no upload button')
  t.equal(await page.getByRole('region', { name: 'Import people from CSV' }).count(), 0, 'no import')
}))

t.test('a photo uploaded from the missing list shows in the directory below at once', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  t.equal((await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Ada', LastName: 'Lovelace', Source_Id: 'A1' } })).status, 200)
  const page = await browser.newPage()
  await signIn(page, service)
  await page.goto(consoleUrl(service, 'people'))
  const directory = page.getByRole('region', { name: 'People', exact: true })
  const row = directory.getByRole('row', { name: /Ada Lovelace/ })
  await row.waitFor()
  t.equal(await row.getByRole('cell').last().textContent(), 'no', 'no photo yet')
  const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64')
  await page.getByLabel('Upload photo of Ada Lovelace').setInputFiles({ name: 'photo.png', mimeType: 'image/png', buffer: png })
  await page.getByText('Photo of Ada Lovelace uploaded.').waitFor()
  await page.getByText('Everyone has a photo.').waitFor()
  // Without a reload of the page: the directory's Photo column follows the upload.
  await row.getByRole('cell', { name: 'yes', exact: true }).waitFor({ timeout: 5000 }).catch(() => {})
  t.equal(await row.getByRole('cell').last().textContent(), 'yes', 'the directory shows the photo')
}))
