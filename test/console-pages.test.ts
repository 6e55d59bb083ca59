/**
 * Every page of the console in a real browser (issue 18): axe-core finds no serious or
 * critical violation (Webhooks too: the root key holds its group from the first start),
 * at desktop width and at a phone's 375 px, where nothing scrolls sideways but tables; a screenshot of each is written to test-output/screenshots
 * (git-ignored) for review. A page whose routes the key may not call has no nav entry.
 */
import t from 'tap'
import { startService } from './helpers/service.ts'
import { consoleUrl, screenshot, seriousViolations, signIn, withBrowser } from './helpers/browser.ts'
import { insertKey, groupNamed } from './helpers/keys.ts'
import { createGroup } from '../kernel/boot/bootstrap.ts'

const pages = [['keys', 'Keys'], ['access', 'Access'], ['usage', 'Usage'], ['logs', 'Logs'], ['people', 'People'], ['audit', 'Audit'], ['webhooks', 'Webhooks']] as const

t.test('axe-core finds no serious or critical violation on any page, wide or narrow', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  await service.call('POST', '/People/Update/OneChange', { body: { FirstName: 'Ada', LastName: 'Lovelace', Dept: 'Research' } })
  for (const [width, height, suffix] of [[1280, 900, ''], [375, 740, '-375']] as const) {
    const page = await browser.newPage({ viewport: { width, height } })
    // Sign-in page first.
    await page.goto(consoleUrl(service))
    await page.getByRole('heading', { name: 'Sign in to keygate' }).waitFor()
    t.same(await seriousViolations(page), [], `sign-in${suffix}`)
    await screenshot(page, `sign-in${suffix}`)
    await signIn(page, service)
    for (const [path, title] of pages) {
      await page.getByRole('link', { name: title, exact: true }).click()
      await page.getByRole('heading', { name: title, level: 1 }).waitFor()
      await page.waitForLoadState('networkidle')
      t.same(await seriousViolations(page), [], `${path}${suffix}`)
      // A table's region inside a section of the same name made two landmarks of one name.
      t.same((await seriousViolations(page, ['moderate'])).filter((violation) => violation.id === 'landmark-unique'), [], `${path}${suffix}: every landmark has a name of its own`)
      const sideways = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)
      t.ok(sideways <= 1, `${path}${suffix}: the page itself does not scroll sideways (${sideways} px)`)
      await screenshot(page, `${path}${suffix}`)
    }
    await page.close()
  }
}))

t.test('the nav shows only the pages a key may use', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const reader = await insertKey(service, {}, [await groupNamed(service, 'Access list reader'), await groupNamed(service, 'Operation list reader')])
  const page = await browser.newPage()
  await signIn(page, service, { ...reader })
  const links = await page.getByRole('navigation', { name: 'Pages' }).getByRole('link').allTextContents()
  t.same(links, ['Access'], 'only Access: the key may read its ACL, nothing else the console shows')
  t.notOk(links.includes('Webhooks'), 'no Webhooks entry without the webhooks group')
}))

t.test('Audit and Webhooks are offered only to a key that may create keys, as the service requires', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const groups = await Promise.all(['Access list reader', 'Operation list reader', 'Key rotation and audit', 'Webhook administration'].map((name) => groupNamed(service, name)))
  const holder = await insertKey(service, {}, groups)
  // The service refuses both to this key (403: only a key that may create keys), although its ACL covers them.
  for (const [method, path] of [['POST', '/Api/Read/Audit'], ['GET', '/Api/Read/Webhooks']] as const) {
    t.equal((await service.call(method, path, { key: holder, body: method === 'POST' ? {} : undefined })).status, 403, path)
  }
  const page = await browser.newPage()
  await signIn(page, service, { ...holder })
  const links = await page.getByRole('navigation', { name: 'Pages' }).getByRole('link').allTextContents()
  t.same(links, ['Access'], 'no Audit or Webhooks page that would only show a refusal')
}))

t.test('a key that may list its calls but not read one record is offered no record to open', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const historyOnly = await createGroup(service.kernel.database.db, { name: 'History only', paths: [{ path: '/Api/Read/History', displayName: 'Recent calls' }] })
  const reader = await insertKey(service, {}, [historyOnly, await groupNamed(service, 'Operation list reader')])
  const page = await browser.newPage()
  await signIn(page, service, { ...reader })
  await page.getByRole('link', { name: 'Logs', exact: true }).click()
  const calls = page.getByRole('region', { name: 'Calls' })
  await calls.getByText(/calls, page 1 of/).waitFor()
  t.ok(await calls.getByRole('cell', { name: '/Api/Read/List' }).first().isVisible(), 'its calls are listed')
  t.equal(await calls.getByRole('button', { name: /^Details of call / }).count(), 0, 'no request id opens a record it would be refused')
}))

t.test('a query the API refuses shows its error without the results of the query before', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const page = await browser.newPage()
  await signIn(page, service)
  await page.getByRole('link', { name: 'Logs', exact: true }).click()
  const calls = page.getByRole('region', { name: 'Calls' })
  await calls.getByText(/calls, page 1 of/).waitFor()
  await page.getByLabel('From').fill('2030-01-02T00:00')
  await page.getByLabel('To').fill('2030-01-01T00:00')
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.getByText(/^Error: From must not be later than To/).waitFor()
  t.equal(await page.getByText(/calls, page/).count(), 0, 'the caption of the query before is gone')
  t.equal(await page.locator('table').count(), 0, 'and its table')
}))

t.test('Logs reads From and To as UTC, the time its table shows, whatever the browser\'s time zone', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  for (let index = 0; index < 3; index++) await service.call('GET', '/Api/Read/Acl')
  const page = await browser.newPage({ timezoneId: 'America/New_York' })
  await signIn(page, service)
  await page.getByRole('link', { name: 'Logs', exact: true }).click()
  const calls = page.getByRole('region', { name: 'Calls' })
  await calls.getByText(/calls, page 1 of/).waitFor()
  // The field's form of a UTC time (as the table's GMT times read), ten minutes either side of now.
  const field = (time: number) => new Date(time).toISOString().slice(0, 16)
  const from = field(Date.now() - 600_000)
  const to = field(Date.now() + 600_000)
  await page.getByLabel('From (UTC)').fill(from)
  await page.getByLabel('To (UTC)').fill(to)
  const answered = page.waitForResponse((response) => response.url().endsWith('/Api/Read/History') && (response.request().postData() ?? '').includes('From'))
  await page.getByRole('button', { name: 'Filter' }).click()
  const answer = await answered
  t.match(JSON.parse(answer.request().postData()!), { From: `${from}:00.000Z`, To: `${to}:00.000Z` }, 'sent as the UTC times typed, not New York\'s')
  const total = ((await answer.json()) as { Total: number }).Total
  t.ok(total >= 3, `the calls of these minutes are found (${total})`)
  await calls.getByText(`${total} calls, page 1 of`).waitFor()
  t.pass('and listed')
}))

t.test('a service that does not answer is said so, not with the browser\'s "Failed to fetch"', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const page = await browser.newPage()
  await signIn(page, service)
  // Every call of the API now fails as a stopped service does: no answer at all.
  await page.route('**/v1.0/**', (route) => route.abort('connectionrefused'))
  await page.getByRole('link', { name: 'Access', exact: true }).click()
  const error = page.getByRole('alert').first()
  await error.waitFor()
  t.match(await error.textContent(), /^Error: The service did not answer \(is it running/, 'the console says the service did not answer')
  t.notMatch(await page.locator('main').textContent(), /Failed to fetch/)

  // Signing in too: the settings file is not reached either.
  await page.unroute('**/v1.0/**')
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.route('**/console/settings.json', (route) => route.abort('connectionrefused'))
  await page.getByLabel('Api_Key').fill(service.admin.apiKey)
  await page.getByLabel('Api_Secret').fill(service.admin.secret)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByText(/^Error: The service did not answer/).waitFor()
  t.pass('at sign-in too')
}))

t.test('a call\'s record opens below the table in view, with the focus; Close gives it back', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  for (let index = 0; index < 40; index++) await service.call('GET', '/Api/Read/Acl')
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  await signIn(page, service)
  await page.getByRole('link', { name: 'Logs', exact: true }).click()
  const details = page.getByRole('button', { name: /^Details of call / }).first()
  await details.waitFor()
  const label = await details.getAttribute('aria-label')
  await details.click()
  const heading = page.getByRole('heading', { name: /^Call \d+$/, level: 2 })
  await heading.waitFor()
  await page.waitForFunction(() => document.activeElement?.id === 'record-title')
  const box = (await heading.boundingBox())!
  t.ok(box.y >= 0 && box.y + box.height <= 800, `the record's heading is in view (y ${Math.round(box.y)})`)
  await page.getByRole('button', { name: 'Close' }).click()
  await page.waitForFunction((label) => document.activeElement?.getAttribute('aria-label') === label, label)
  t.pass('Close gives the focus back to the request id that opened it')
}))
