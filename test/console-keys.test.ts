/**
 * The console's Keys page in a real browser (issue 18): sign in with the admin key,
 * create a key and see its secret once (gone after a reload), call with it from Node,
 * disable it in the console and see that call refused 401, rotate another key and see
 * both secrets work during the overlap. Errors are the API's own `Error:` text.
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
