/**
 * The console's Webhooks page in a real browser (issues 17 and 18): sign in with the
 * admin key, add a webhook to a loopback receiver and see its signing secret once, make
 * a key.changed happen and see the delivery listed as delivered, with its details; edit
 * and disable the webhook; a Url the service refuses shows the API's own `Error:` text.
 * On SQLite and MariaDB.
 */
import t from 'tap'
import { forEachDatabase, startService } from './helpers/service.ts'
import { answerDayCode, screenshot, signIn, withBrowser } from './helpers/browser.ts'
import { groupNamed } from './helpers/keys.ts'
import { fastWebhooks, startReceiver } from './helpers/webhookReceiver.ts'

t.test('add a webhook, see its secret once, and its deliveries', (t) => withBrowser(t, (browser) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind, config: fastWebhooks })
    const receiver = await startReceiver(t)
    const page = await browser.newPage()
    await signIn(page, service)
    await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Webhooks', exact: true }).click()
    await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor()
    t.pass('the root key has "Webhook administration": the nav shows Webhooks')

    async function addWebhook(url: string) {
      await page.getByRole('button', { name: 'Add webhook' }).click()
      const form = page.getByRole('form', { name: 'Add a webhook' })
      await form.getByLabel('URL').fill(url)
      await form.getByLabel(/key\.changed/).check()
      await form.getByRole('button', { name: 'Add' }).click()
    }

    // Refused Urls: the API's text, and nothing written.
    await addWebhook('ftp://127.0.0.1/hook')
    await answerDayCode(page, service)
    await page.getByText('Error: Url must start with https:// or http://.').waitFor()
    await page.getByRole('button', { name: 'Cancel' }).click()
    await addWebhook('http://10.1.2.3/hook')
    await page.getByText('Error: The host 10.1.2.3 resolves to 10.1.2.3, a private, loopback or link-local address that webhooks may not reach.').waitFor()
    t.pass('a refused Url shows the API error text')
    t.same((await service.call('GET', '/Api/Read/Webhooks')).json, [], 'nothing was written')
    await page.getByRole('button', { name: 'Cancel' }).click()

    // Added: the signing secret is shown once.
    await addWebhook(receiver.url)
    const secret = await page.getByTestId('new-api-secret').textContent()
    t.match(secret, /^whsec_/, 'the signing secret is shown')
    await screenshot(page, `webhooks-new-secret-${kind}`)
    const row = page.getByRole('row', { name: new RegExp(receiver.url.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')) })
    await row.waitFor()
    t.match(await row.textContent(), /key\.changed.*Active/)

    // An event: a key is edited through the API; its delivery arrives, signed with that secret.
    const key = await service.call('POST', '/Api/Create/Key', { body: { Display_Name: 'Watched', GroupId: [await groupNamed(service, 'Access list reader')], Require_Https: 0 }, today: true })
    t.equal(key.status, 200, key.text)
    const edited = await service.call('POST', '/Api/Edit/Key', { body: { KeyId: key.json.Id, Display_Name: 'Watched again' }, today: true })
    t.equal(edited.status, 200, edited.text)
    const [arrived] = await receiver.waitFor(1)
    t.equal(arrived.json.type, 'key.changed')
    const listed = await service.call('POST', '/Api/Read/Deliveries', { body: { Status: 'delivered' } })
    t.equal(listed.json.Total, 1, 'delivered, as the API says')

    // The console lists it as delivered, filtered by status, and shows it in detail.
    const filters = page.getByRole('form', { name: 'Delivery filters' })
    await filters.getByLabel('Status').selectOption('delivered')
    await filters.getByRole('button', { name: 'Filter' }).click()
    const deliveries = page.getByRole('region', { name: 'Deliveries' })
    await deliveries.getByText('1 deliveries, page 1 of 1').waitFor()
    t.match(await deliveries.locator('tbody tr').first().textContent(), /key\.changed.*delivered/)
    await page.getByRole('button', { name: `Details of delivery ${arrived.id}` }).click()
    await t.resolves(page.getByTestId('delivery-status').filter({ hasText: 'delivered' }).waitFor(), 'the detail says delivered')
    t.match(await page.getByRole('region', { name: /^Delivery/ }).textContent(), /Attempts1Last HTTP status200/)
    await screenshot(page, `webhooks-deliveries-${kind}`)

    // A query the API refuses (From later than To): its error, and not the table of the query before beside it.
    await filters.getByLabel('From').fill('2030-01-02')
    await filters.getByLabel('To').fill('2030-01-01')
    await filters.getByRole('button', { name: 'Filter' }).click()
    await deliveries.getByRole('alert').waitFor()
    t.equal(await deliveries.locator('table').count(), 0, 'the previous deliveries are gone')
    t.equal(await deliveries.getByText(/deliveries, page/).count(), 0, 'and their caption')
    await filters.getByLabel('From').fill('')
    await filters.getByLabel('To').fill('')
    await filters.getByRole('button', { name: 'Filter' }).click()
    await deliveries.getByText('1 deliveries, page 1 of 1').waitFor()

    // Shown once: after a reload the secret is gone.
    await page.reload()
    await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor()
    await row.waitFor()
    t.notOk((await page.content()).includes(secret!), 'the secret is not shown again')

    // Edit: a refused Url is the API's text; then events and Disabled are saved.
    const id = (await service.call('GET', '/Api/Read/Webhooks')).json[0].Id as number
    await page.getByRole('button', { name: `Edit webhook ${id}` }).click()
    const edit = page.getByRole('form', { name: `Edit webhook ${id}` })
    await edit.getByLabel('URL').fill('http://10.1.2.3/hook')
    await edit.getByRole('button', { name: 'Save' }).click()
    await page.getByText(/^Error: The host 10\.1\.2\.3 resolves to/).waitFor()
    await edit.getByLabel('URL').fill(receiver.url)
    await edit.getByLabel(/key\.rotated/).check()
    await edit.getByLabel(/^Disabled/).check()
    await edit.getByRole('button', { name: 'Save' }).click()
    await page.getByText(`Webhook ${id} saved.`).waitFor()
    const saved = (await service.call('GET', '/Api/Read/Webhooks')).json[0]
    t.match(saved, { Id: id, Url: receiver.url, Events: ['key.changed', 'key.rotated'], Disabled: 1 })
    await page.getByRole('button', { name: `Enable webhook ${id}` }).click()
    await page.getByText(`Webhook ${id} enabled.`).waitFor()
    t.equal((await service.call('GET', '/Api/Read/Webhooks')).json[0].Disabled, 0, 'enabled again')
    await page.close()
  })))

t.test('Edit of a webhook low in a long list opens in view, with the focus on its first field', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite', config: fastWebhooks })
  const receiver = await startReceiver(t)
  for (let index = 0; index < 15; index++) {
    const made = await service.call('POST', '/Api/Create/Webhook', { today: true, body: { Url: `${receiver.url}?n=${index}`, Events: ['key.changed'] } })
    t.equal(made.status, 200, made.text)
  }
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  await signIn(page, service)
  await page.getByRole('navigation', { name: 'Pages' }).getByRole('link', { name: 'Webhooks', exact: true }).click()
  const edit = page.getByRole('button', { name: /^Edit webhook / }).last()
  await edit.click()
  const heading = page.getByRole('heading', { name: /^Edit webhook \d+$/, level: 2 })
  await heading.waitFor()
  const box = (await heading.boundingBox())!
  t.ok(box.y >= 0 && box.y + box.height <= 800, `the form's heading is in view (y ${Math.round(box.y)})`)
  await page.waitForFunction(() => document.activeElement?.closest('form')?.getAttribute('aria-labelledby') === 'webhook-edit-title')
  t.pass('the focus is in the form')
}))
