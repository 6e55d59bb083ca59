/**
 * The console's Usage page in a real browser (issue 18): the calls just made with a key
 * appear in its chart and table, per status, with its rate-limit window as a gauge; credits
 * that refill are a gauge too; the chart follows a window narrowed to a phone's width.
 */
import t from 'tap'
import { startService } from './helpers/service.ts'
import { consoleUrl, screenshot, seriousViolations, signIn, withBrowser } from './helpers/browser.ts'

t.test('the usage chart shows the calls just made', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const groups = (await service.call('GET', '/Api/Read/Groups')).json as { Id: number }[]
  const created = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Busy key', GroupId: groups.map((group) => group.Id), Require_Https: 0, MaxHits: '50/1Hour' } })
  const key = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
  for (let i = 0; i < 7; i++) await service.call('GET', '/Api/Read/Acl', { key })
  await service.call('POST', '/Api/Read/Log', { key, body: { LogRequestId: 1 } })

  const page = await browser.newPage()
  await signIn(page, service)
  await page.goto(consoleUrl(service, 'usage'))
  await page.getByLabel('Whose calls').selectOption({ label: 'Busy key' })
  await page.getByTestId('usage-total').filter({ hasText: /^8$/ }).waitFor()
  t.pass('8 calls counted')
  t.equal(await page.locator('.chart canvas').count(), 1, 'the chart is drawn')
  t.match(await page.locator('.chart').getAttribute('aria-label'), /by status, 8 in all/)
  const rows = await page.getByRole('region', { name: 'Calls by status' }).locator('tbody tr').allTextContents()
  t.equal(rows.length, 2)
  t.match(rows[0], /200.*7$/)
  t.match(rows[1], /404.*1$/)
  t.ok(await page.getByLabel(/Window 1Hour: 8 of 50 used/).isVisible(), 'the key\'s window as a gauge')
  await screenshot(page, 'usage-key')

  await page.getByLabel('Period').selectOption('30d')
  await page.getByText(/Calls per day and status/).waitFor()
  t.pass('the 30-day view')
}))

t.test('credits that refill are a gauge; the chart follows the window to a phone width', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const groups = (await service.call('GET', '/Api/Read/Groups')).json as { Id: number }[]
  const created = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Metered key', GroupId: groups.map((group) => group.Id), Require_Https: 0, Credits: 50, Refill: { Amount: 100, Every: '1Day' } } })
  t.equal(created.status, 200, created.text)
  const key = { apiKey: created.json.Api_Key, secret: created.json.Api_Secret }
  for (let i = 0; i < 10; i++) await service.call('GET', '/Api/Read/Acl', { key })

  const page = await browser.newPage()
  await page.setViewportSize({ width: 1280, height: 900 })
  await signIn(page, service)
  await page.goto(consoleUrl(service, 'usage'))
  await page.getByLabel('Whose calls').selectOption({ label: 'Metered key' })
  await page.getByTestId('usage-total').filter({ hasText: /^10$/ }).waitFor()
  // It started with 50 of a refill of 100: 10 calls leave 40, not "60 used".
  await page.getByLabel('Credits: 40 left of 100').waitFor()
  t.match(await page.locator('.gauge').filter({ hasText: 'Credits' }).locator('span').last().textContent(), /^40 left of 100; resets in /, 'what is left against the refill amount')
  t.pass('credits as a gauge of the refill amount')

  await page.setViewportSize({ width: 375, height: 800 })
  await page.waitForFunction(() => (document.querySelector('.chart canvas') as HTMLCanvasElement | null)?.getBoundingClientRect().width! <= 375)
  t.same(await seriousViolations(page), [], 'axe: nothing serious after the window narrowed')
  t.equal(await page.evaluate(() => document.documentElement.scrollWidth <= innerWidth), true, 'nothing scrolls sideways')
}))

t.test('the chart labels its buckets in UTC, as the table does, whatever the browser\'s time zone', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  for (let i = 0; i < 3; i++) await service.call('GET', '/Api/Read/Acl')
  // West of Greenwich, local time would put today's UTC bucket under yesterday.
  const page = await browser.newPage({ timezoneId: 'America/New_York' })
  await signIn(page, service)
  await page.goto(consoleUrl(service, 'usage'))
  const now = new Date()
  const pad = (value: number) => String(value).padStart(2, '0')
  const day = `${now.getUTCFullYear()}-${pad(now.getUTCMonth() + 1)}-${pad(now.getUTCDate())}`
  const hour = now.getUTCHours() % 12 === 0 ? 12 : now.getUTCHours() % 12
  for (const [range, label] of [['24h', `${day} ${hour}:00${now.getUTCHours() < 12 ? 'am' : 'pm'}`], ['30d', `${day} 12:00am`]]) {
    await page.getByLabel('Period').selectOption(range)
    await page.getByText(range === '24h' ? /Calls per hour and status/ : /Calls per day and status/).waitFor()
    // The cursor on the newest bucket: the legend names its time.
    const over = (await page.locator('.chart .u-over').boundingBox())!
    await page.mouse.move(over.x + over.width - 1, over.y + over.height / 2)
    t.equal(await page.locator('.chart .u-legend .u-value').first().textContent(), label, `${range}: the newest bucket is ${label} (UTC)`)
  }
}))
