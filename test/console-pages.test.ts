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
