/**
 * The console's Keys page in a real browser (issue 18): sign in with the admin key,
 * create a key and see its secret once (gone after a reload), call with it from Node,
 * disable it in the console and see that call refused 401, rotate another key and see
 * both secrets work during the overlap. Errors are the API's own `Error:` text. Start and
 * end dates are shown and set; forms below the table come into view with the focus, which
 * never falls to the body after an action; sign-in errors say what is wrong.
 */
import t from 'tap'
import { startService } from './helpers/service.ts'
import { answerDayCode, consoleUrl, screenshot, signIn, withBrowser } from './helpers/browser.ts'
import { groupNamed, insertKey } from './helpers/keys.ts'

t.test('create, use, disable and rotate a key in the console', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const page = await browser.newPage()
  await signIn(page, service)
  t.ok(await page.getByRole('heading', { name: 'Keys', level: 1 }).isVisible(), 'the Keys page opens first')
  const stored = await page.evaluate(() => ({ cookies: document.cookie, url: location.href }))
  t.equal(stored.cookies, '', 'no cookie')
  t.notMatch(stored.url, service.admin.secret, 'the secret is not in the URL')

  async function createKey(name: string) {
    await page.getByRole('button', { name: 'Create key' }).click()
    const form = page.getByRole('form', { name: 'Create a key' })
    await form.getByLabel('Name (Display_Name)').fill(name)
    await form.getByLabel(/Access list reader/).check()
    await form.getByLabel(/Require HTTPS/).uncheck()
    await form.getByRole('button', { name: 'Create' }).click()
  }

  await createKey('Console key')
  // Creating a key needs the day code: the console asks for it.
  await answerDayCode(page, service)
  const apiKey = await page.getByTestId('new-api-key').textContent()
  const secret = await page.getByTestId('new-api-secret').textContent()
  t.match(apiKey, /^kg_/)
  t.ok(secret && secret.length >= 40, 'the secret is shown')
  await screenshot(page, 'keys-new-secret')
  const key = { apiKey: apiKey!, secret: secret! }
  t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 200, 'the new key works from Node')

  // Shown once: after a reload it is gone, and the page does not keep it anywhere.
  await page.reload()
  await page.getByRole('row', { name: /Console key/ }).waitFor()
  t.equal(await page.getByTestId('new-api-secret').count(), 0, 'the secret is not shown again')
  t.notOk((await page.content()).includes(key.secret), 'nor is it anywhere in the page')
  t.notOk(await page.evaluate((value) => JSON.stringify(sessionStorage).includes(value), key.secret), 'nor in session storage')

  // A mistake shows the API's own text: the name is taken.
  await createKey('Console key')
  await page.getByText("Error: Display Name 'Console key' is already defined.").waitFor()
  t.pass('a taken name shows the API error text')
  await page.getByRole('button', { name: 'Cancel' }).click()

  // Disable in the console: the next call with the key is refused.
  await page.getByRole('button', { name: 'Disable Console key' }).click()
  await page.getByText('Key "Console key" disabled.').waitFor()
  t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 401, 'a disabled key gets 401')
  await page.getByRole('button', { name: 'Enable Console key' }).waitFor()

  // Rotate another key with an overlap: old and new secrets both work.
  await createKey('Rotated key')
  const rotatedKey = await page.getByTestId('new-api-key').textContent()
  const oldSecret = await page.getByTestId('new-api-secret').textContent()
  await page.getByRole('button', { name: 'I have stored it' }).click()
  await page.getByRole('button', { name: 'Rotate Rotated key' }).click()
  await page.getByLabel('Old secret keeps working for').selectOption({ label: '1 hour' })
  await page.getByRole('button', { name: 'Rotate now' }).click()
  await page.getByText(/The old secret keeps working until/).waitFor()
  const newSecret = await page.getByTestId('new-api-secret').textContent()
  t.not(newSecret, oldSecret)
  await screenshot(page, 'keys-rotated')
  t.equal((await service.call('GET', '/Api/Read/Acl', { key: { apiKey: rotatedKey!, secret: newSecret! } })).status, 200, 'the new secret works')
  t.equal((await service.call('GET', '/Api/Read/Acl', { key: { apiKey: rotatedKey!, secret: oldSecret! } })).status, 200, 'the old secret works during the overlap')

  // Sign out forgets the session.
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.goto(consoleUrl(service, 'keys'))
  await page.getByRole('heading', { name: 'Sign in to keygate' }).waitFor()
  t.equal(await page.evaluate(() => sessionStorage.length), 0, 'nothing left in session storage')
}))

t.test('focus follows the forms and the day-code dialog; an error of one form is not shown on another', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const made = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Other key', GroupId: [await groupNamed(service, 'Access list reader')], Require_Https: 0 } })
  t.equal(made.status, 200, made.text)
  const page = await browser.newPage()
  await signIn(page, service)
  const focused = () => page.evaluate(() => { const element = document.activeElement!; return `${element.tagName} ${element.getAttribute('name') ?? element.textContent}` })

  // The Create key button goes with the form it opens: the form's first field takes the focus.
  await page.getByRole('button', { name: 'Create key' }).focus()
  await page.keyboard.press('Enter')
  const form = page.getByRole('form', { name: 'Create a key' })
  await form.waitFor()
  t.equal(await focused(), 'INPUT Display_Name', 'the name field has the focus')

  // Escape in the day-code dialog: the focus returns to the button that opened it.
  await page.keyboard.type('Focus key')
  await form.getByLabel(/Access list reader/).check()
  await form.getByRole('button', { name: 'Create' }).focus()
  await page.keyboard.press('Enter')
  await page.getByRole('dialog', { name: 'Day code needed' }).waitFor()
  await page.keyboard.press('Escape')
  await page.getByText('Error: This call needs the day code (x-apitoday).').waitFor()
  await page.waitForFunction(() => document.activeElement?.textContent === 'Create')
  t.equal(await focused(), 'BUTTON Create', 'back on the Create button')

  // A refused create, then Cancel and Edit of another key: the create's error is not shown there.
  await form.getByLabel(/Access list reader/).uncheck()
  await form.getByRole('button', { name: 'Create' }).click()
  await answerDayCode(page, service)
  await page.getByText(/^Error: GroupId must have at least 1 item/).waitFor()
  await form.getByRole('button', { name: 'Cancel' }).click()
  await page.getByRole('button', { name: 'Edit Other key' }).click()
  await page.getByRole('form', { name: /Edit key/ }).waitFor()
  t.equal(await page.getByRole('alert').count(), 0, 'no error left from the create')
}))

t.test('edit sends only what changed; a key bound to SHA-512 signs in, one bound to md5 is told why; a key without the operation list is told why', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const aclReader = await groupNamed(service, 'Access list reader')
  const made = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Level three', GroupId: [aclReader], Require_Https: 0, LogLevel: 3 } })
  t.equal(made.status, 200, made.text)
  const page = await browser.newPage()
  await signIn(page, service)
  await page.getByRole('button', { name: 'Edit Level three' }).click()
  const form = page.getByRole('form', { name: /Edit key/ })
  await form.getByLabel('Email (optional)').fill('ops@example.com')
  await form.getByRole('button', { name: 'Save' }).click()
  await answerDayCode(page, service)
  await page.getByText('Key saved.').waitFor()
  const listed = ((await service.call('GET', '/Api/Read/Keys')).json as { Id: number; LogLevel: number; Email: string }[]).find((key) => key.Id === made.json.Id)!
  t.match(listed, { LogLevel: 3, Email: 'ops@example.com' }, 'a LogLevel the form does not offer is kept')
  const audit = (await service.call('POST', '/Api/Read/Audit', { body: { KeyId: made.json.Id } })).json.Records[0]
  t.same(audit.After, { Email: 'ops@example.com' }, 'the audit trail holds only the change made')

  // A key whose StartDate is still to come is "not active yet", not "disabled", and has no Enable button.
  const later = new Date(Date.now() + 86_400_000).toUTCString()
  const future = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Starts tomorrow', GroupId: [aclReader], Require_Https: 0, StartDate: later } })
  t.equal(future.status, 200, future.text)
  await page.reload()
  const row = page.getByRole('row', { name: /Starts tomorrow/ })
  await row.getByText(`Not active yet: starts ${later}`).waitFor()
  t.equal(await row.getByRole('button', { name: /Enable/ }).count(), 0, 'no Enable that would change nothing')

  // Require_Hash 5 (D4): the console finds that the key signs with SHA-512.
  const bound = await insertKey(service, { require_hash: 5 }, [aclReader, await groupNamed(service, 'Operation list reader')])
  const second = await browser.newPage()
  await signIn(second, service, bound)
  t.equal(await second.evaluate(() => JSON.parse(sessionStorage.getItem('keygate.credentials') ?? '{}').hash), 'SHA-512', 'signed in with SHA-512')

  // Require_Hash 1: the browser has no HMAC-MD5, so every hash it has fails; it says the key may be bound to md5.
  const md5 = await insertKey(service, { require_hash: 1 }, [aclReader, await groupNamed(service, 'Operation list reader')])
  const fourth = await browser.newPage()
  await fourth.goto(consoleUrl(service))
  await fourth.getByLabel('Api_Key').fill(md5.apiKey)
  await fourth.getByLabel('Api_Secret').fill(md5.secret)
  await fourth.getByRole('button', { name: 'Sign in' }).click()
  await fourth.getByText(/may be bound to md5 \(Require_Hash 1\), which the browser cannot sign.*npm run call works with it/).waitFor()
  t.pass('a key bound to md5 is told why, not only that its secret does not match')

  // No "Operation list reader": the console cannot build its menu, and says what the key lacks.
  const limited = await insertKey(service, {}, [aclReader])
  const third = await browser.newPage()
  await third.goto(consoleUrl(service))
  await third.getByLabel('Api_Key').fill(limited.apiKey)
  await third.getByLabel('Api_Secret').fill(limited.secret)
  await third.getByRole('button', { name: 'Sign in' }).click()
  await third.getByText(/needs a key whose groups include "Operation list reader"/).waitFor()
  t.pass('a key without the operation list is told what it lacks')
}))

t.test('without the api plugin the console says at sign-in what the service lacks', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite', config: { plugins: ['keys', 'acl', 'log', 'people', 'account', 'webhooks'] } })
  const page = await browser.newPage()
  await page.goto(consoleUrl(service))
  await page.getByLabel('Api_Key').fill(service.admin.apiKey)
  await page.getByLabel('Api_Secret').fill(service.admin.secret)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByText(/does not run the api plugin, which the console needs/).waitFor()
  t.pass('told to enable the api plugin, not shown a bare "Not found"')
}))

t.test('StartDate and EndDate: shown in the table, set and cleared in the forms; Disable says it replaces a planned end', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const aclReader = await groupNamed(service, 'Access list reader')
  const planned = new Date(Date.UTC(2099, 5, 30)).toUTCString()
  const made = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Planned end', GroupId: [aclReader], Require_Https: 0, EndDate: planned } })
  t.equal(made.status, 200, made.text)
  const listed = async (name: string) => ((await service.call('GET', '/Api/Read/Keys')).json as { Display_Name: string; StartDate: string | null; EndDate: string | null }[]).find((key) => key.Display_Name === name)!
  const page = await browser.newPage({ timezoneId: 'Pacific/Auckland' })
  await signIn(page, service)
  await page.getByRole('row', { name: /Planned end/ }).getByText(`Active; ends ${planned}`).waitFor()
  t.pass('the planned end date is in the table')

  // Create with both dates (UTC fields, whatever the browser's time zone), then clear EndDate in Edit.
  await page.getByRole('button', { name: 'Create key' }).click()
  const form = page.getByRole('form', { name: 'Create a key' })
  await form.getByLabel('Name (Display_Name)').fill('Dated key')
  await form.getByLabel('Starts (StartDate, UTC, optional)').fill('2024-01-01T08:30')
  await form.getByLabel('Ends (EndDate, UTC, optional)').fill('2099-12-31T23:59')
  await form.getByLabel(/Access list reader/).check()
  await form.getByRole('button', { name: 'Create' }).click()
  await answerDayCode(page, service)
  await page.getByRole('button', { name: 'I have stored it' }).click()
  t.match(await listed('Dated key'), { StartDate: 'Mon, 01 Jan 2024 08:30:00 GMT', EndDate: 'Thu, 31 Dec 2099 23:59:00 GMT' }, 'both dates sent as UTC')
  await page.getByRole('row', { name: /Dated key/ }).getByText('Active; ends Thu, 31 Dec 2099 23:59:00 GMT').waitFor()

  await page.getByRole('button', { name: 'Edit Dated key' }).click()
  const edit = page.getByRole('form', { name: /Edit key/ })
  t.match(await edit.getByLabel('Starts (StartDate, UTC, optional)').inputValue(), /^2024-01-01T08:30/, 'Edit shows the StartDate')
  t.match(await edit.getByLabel('Ends (EndDate, UTC, optional)').inputValue(), /^2099-12-31T23:59/, 'and the EndDate')
  await edit.getByLabel('Ends (EndDate, UTC, optional)').fill('')
  await edit.getByRole('button', { name: 'Save' }).click()
  await page.getByText('Key saved.').waitFor()
  t.match(await listed('Dated key'), { StartDate: 'Mon, 01 Jan 2024 08:30:00 GMT', EndDate: null }, 'EndDate cleared, StartDate untouched')

  // Disable of a key with a planned end asks first, naming the date; dismissed, nothing changes.
  let question = ''
  page.once('dialog', (dialog) => { question = dialog.message(); void dialog.dismiss() })
  await page.getByRole('button', { name: 'Disable Planned end' }).click()
  t.match(question, `planned end date ${planned} is replaced by now (the audit trail keeps it)`, 'the confirm names the planned end date')
  t.equal((await listed('Planned end')).EndDate, planned, 'dismissed: the planned end stays')
  page.once('dialog', (dialog) => void dialog.accept())
  await page.getByRole('button', { name: 'Disable Planned end' }).click()
  await page.getByText(`Key "Planned end" disabled. Its planned end date ${planned} was replaced by now (the audit trail keeps it).`).waitFor()
  t.ok(Date.parse((await listed('Planned end')).EndDate!) <= Date.now(), 'accepted: EndDate is now')
}))

t.test('Disable takes now from the server\'s clock: a browser clock 200 s ahead still disables the key at once', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const aclReader = await groupNamed(service, 'Access list reader')
  const made = await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: 'Skewed', GroupId: [aclReader], Require_Https: 0 } })
  t.equal(made.status, 200, made.text)
  const key = { apiKey: made.json.Api_Key as string, secret: made.json.Api_Secret as string }
  const page = await browser.newPage()
  // The page's clock runs 200 s ahead (inside the signature's clock window, so the console's own calls still pass).
  // A script's text, not a function: the test's compiled function would call helpers the page lacks.
  await page.addInitScript(`{
    const RealDate = Date
    const ahead = 200000
    globalThis.Date = class extends RealDate {
      constructor(...given) { if (given.length === 0) super(RealDate.now() + ahead); else super(...given) }
      static now() { return RealDate.now() + ahead }
    }
  }`)
  await signIn(page, service)
  t.ok(await page.evaluate(() => Date.now()) - Date.now() > 150_000, 'the page\'s clock is ahead')
  await page.getByRole('button', { name: 'Disable Skewed' }).click()
  await answerDayCode(page, service)
  await page.getByText('Key "Skewed" disabled.').waitFor()
  t.equal((await service.call('GET', '/Api/Read/Acl', { key })).status, 401, 'the key\'s next call is refused')
  const listed = ((await service.call('GET', '/Api/Read/Keys')).json as { Display_Name: string; EndDate: string }[]).find((one) => one.Display_Name === 'Skewed')!
  t.ok(Date.parse(listed.EndDate) <= Date.now(), `EndDate ${listed.EndDate} is the server's now, not the browser's`)
  await page.getByRole('row', { name: /Skewed/ }).getByText(/^Disabled since /).waitFor()
  t.pass('the row says disabled')
}))

t.test('Edit and Rotate open below a long table: scrolled into view and focused; the focus comes back after each action', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const aclReader = await groupNamed(service, 'Access list reader')
  const statuses = []
  for (let index = 1; index <= 30; index++) {
    statuses.push((await service.call('POST', '/Api/Create/Key', { today: true, body: { Display_Name: `Key ${String(index).padStart(2, '0')}`, GroupId: [aclReader], Require_Https: 0 } })).status)
  }
  t.same(new Set(statuses), new Set([200]), '30 keys made: the table is longer than the window')
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
  await signIn(page, service)
  await page.getByRole('row', { name: /Key 30/ }).waitFor()
  const focused = () => page.evaluate(() => { const element = document.activeElement!; return `${element.tagName} ${element.getAttribute('aria-label') ?? element.getAttribute('name') ?? element.textContent}` })
  const inView = async (name: RegExp | string) => {
    const box = (await page.getByRole('heading', { name, level: 2 }).boundingBox())!
    return box.y >= 0 && box.y + box.height <= 800
  }

  await page.getByRole('button', { name: 'Edit Key 01' }).click()
  await page.getByRole('form', { name: /Edit key/ }).waitFor()
  await page.waitForFunction(() => document.activeElement?.getAttribute('name') === 'Display_Name')
  t.ok(await inView(/Edit key/), 'the Edit form is scrolled into view')
  t.equal(await focused(), 'INPUT Display_Name', 'its first field has the focus')
  await page.getByRole('form', { name: /Edit key/ }).getByRole('button', { name: 'Cancel' }).click()
  await page.waitForFunction(() => document.activeElement?.getAttribute('aria-label') === 'Edit Key 01')
  t.pass('Cancel gives the focus back to the Edit button')

  await page.getByRole('button', { name: 'Rotate Key 01' }).click()
  await page.getByRole('form', { name: 'Rotate the secret' }).waitFor()
  await page.waitForFunction(() => document.activeElement?.getAttribute('name') === 'overlap')
  t.ok(await inView('Rotate the secret'), 'the Rotate form is scrolled into view')
  await page.getByRole('button', { name: 'Rotate now' }).click()
  await answerDayCode(page, service)
  await page.getByRole('button', { name: 'I have stored it' }).click()
  await page.waitForFunction(() => document.activeElement?.getAttribute('aria-label') === 'Rotate Key 01')
  t.pass('"I have stored it" gives the focus back to the Rotate button')

  // Disable/Enable: the button is disabled while the call runs, then replaced; the row's new one has the focus.
  await page.getByRole('button', { name: 'Disable Key 02' }).click()
  await page.getByText('Key "Key 02" disabled.').waitFor()
  await page.waitForFunction(() => document.activeElement?.getAttribute('aria-label') === 'Enable Key 02')
  await page.getByRole('button', { name: 'Enable Key 02' }).click()
  await page.getByText('Key "Key 02" enabled').waitFor()
  await page.waitForFunction(() => document.activeElement?.getAttribute('aria-label') === 'Disable Key 02')
  t.pass('the focus follows Disable and Enable')

  // Create key: Cancel, and "I have stored it" after a create, give the focus back to the Create key button.
  await page.getByRole('button', { name: 'Create key' }).click()
  await page.getByRole('form', { name: 'Create a key' }).getByRole('button', { name: 'Cancel' }).click()
  await page.waitForFunction(() => document.activeElement?.textContent === 'Create key')
  await page.getByRole('button', { name: 'Create key' }).click()
  const form = page.getByRole('form', { name: 'Create a key' })
  await form.getByLabel('Name (Display_Name)').fill('Key 31')
  await form.getByLabel(/Access list reader/).check()
  await form.getByRole('button', { name: 'Create' }).click()
  await page.getByRole('button', { name: 'I have stored it' }).click()
  await page.waitForFunction(() => document.activeElement?.textContent === 'Create key')
  t.pass('the focus goes back to Create key')
}))

t.test('sign-in: a key or secret of spaces only, a wrong secret, a day code cancelled', (t) => withBrowser(t, async (browser) => {
  const service = await startService(t, { kind: 'sqlite' })
  const page = await browser.newPage()
  await page.goto(consoleUrl(service))
  const tryKey = async (apiKey: string, secret: string) => {
    await page.getByLabel('Api_Key').fill(apiKey)
    await page.getByLabel('Api_Secret').fill(secret)
    await page.getByRole('button', { name: 'Sign in' }).click()
  }
  await tryKey('   ', '  ')
  t.equal(await page.getByRole('alert').textContent(), 'Error: Api_Key and Api_Secret must not be empty.', 'said plainly, not WebCrypto\'s text')
  t.equal(await page.evaluate(() => document.activeElement?.getAttribute('name')), 'apiKey', 'the first field has the focus')

  await tryKey(service.admin.apiKey, 'wrong secret')
  await page.getByText(/does not match.*Check the key and secret/).waitFor()
  await page.waitForFunction(() => document.activeElement?.getAttribute('name') === 'apiKey')
  t.pass('after a refused sign-in the focus is on the first field, not the body')

  // DayPass 1: the day code is asked for at sign-in; cancelled, the key and secret are not blamed.
  const dayPass = await insertKey(service, { day_pass: 1 }, [await groupNamed(service, 'Access list reader'), await groupNamed(service, 'Operation list reader')])
  await tryKey(dayPass.apiKey, dayPass.secret)
  await page.getByRole('dialog', { name: 'Day code needed' }).getByRole('button', { name: 'Cancel' }).click()
  const error = page.getByRole('alert')
  await error.getByText(/needs the day code/).waitFor()
  t.notMatch(await error.textContent(), /Check the key and secret/, 'no hint that the key or secret is wrong')
  t.match(await error.textContent(), /needs today's day code for every call, signing in too/)
}))
