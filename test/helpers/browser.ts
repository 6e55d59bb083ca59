/**
 * Browser tests (issue 18): Debian's Chromium driven by playwright-core, nothing
 * downloaded. In CI (CI=true) a missing Chromium or an unbuilt console fails the test;
 * elsewhere the test reports itself skipped.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execFileSync } from 'node:child_process'
import type { Test } from 'tap'
import { chromium, type Browser, type Page } from 'playwright-core'
import type { Service } from './service.ts'

const repository = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const screenshotFolder = join(repository, 'test-output', 'screenshots')

function chromiumPath(): string | null {
  if (process.env.CHROMIUM_PATH) return process.env.CHROMIUM_PATH
  for (const name of ['chromium', 'chromium-browser']) {
    try {
      return execFileSync('which', [name], { encoding: 'utf8' }).trim() || null
    } catch {
      // not on PATH under this name
    }
  }
  return existsSync('/usr/bin/chromium') ? '/usr/bin/chromium' : null
}

/** Why browser tests cannot run here, or null when they can. */
export function browserProblem(): string | null {
  if (!chromiumPath()) return 'Chromium is not installed (apt-get install chromium)'
  if (!existsSync(join(repository, 'dist', 'console', 'index.html'))) return 'the console is not built (npm run build)'
  return null
}

/** Runs `body` with a fresh browser, or skips (fails in CI) when there is none. */
export async function withBrowser(t: Test, body: (browser: Browser) => Promise<void>): Promise<void> {
  const problem = browserProblem()
  if (problem) {
    if (process.env.CI === 'true') t.fail(`browser tests are required in CI: ${problem}`)
    else await t.test('in a browser', { skip: `browser tests skipped: ${problem}` }, async () => {})
    return
  }
  // playwright-core gives each launch a new, empty profile of its own and removes it after.
  const browser = await chromium.launch({
    executablePath: chromiumPath()!,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
  })
  try {
    await body(browser)
  } finally {
    await browser.close()
  }
}

export function consoleUrl(service: Service, page = ''): string {
  return `http://127.0.0.1:${service.port}/console/${page}`
}

/** Signs in with the service's admin key, as a person would type it. */
export async function signIn(page: Page, service: Service, key = service.admin): Promise<void> {
  await page.goto(consoleUrl(service))
  await page.getByLabel('Api_Key').fill(key.apiKey)
  await page.getByLabel('Api_Secret').fill(key.secret)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('navigation', { name: 'Pages' }).waitFor()
}

/** Answers the day-code dialog if it opens. */
export async function answerDayCode(page: Page, service: Service): Promise<void> {
  const dialog = page.getByRole('dialog', { name: 'Day code needed' })
  await dialog.waitFor()
  await dialog.getByLabel('Day code (8 digits)').fill(service.today())
  await dialog.getByRole('button', { name: 'Continue' }).click()
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

/**
 * axe-core from node_modules, run in the page (evaluated through the DevTools protocol:
 * the page's CSP rightly refuses an injected script tag): its violations of the impacts
 * given, serious and critical unless told.
 */
export async function seriousViolations(page: Page, impacts: string[] = ['serious', 'critical']): Promise<{ id: string; impact: string; nodes: string[] }[]> {
  await page.evaluate(axeSource)
  return page.evaluate(async (impacts) => {
    const axe = (globalThis as unknown as { axe: { run: (context: Document) => Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> } }).axe
    const result = await axe.run(document)
    return result.violations.filter((violation) => impacts.includes(violation.impact))
      .map((violation) => ({ id: violation.id, impact: violation.impact, nodes: violation.nodes.map((node) => node.target.join(' ')) }))
  }, impacts)
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(screenshotFolder, { recursive: true })
  await page.screenshot({ path: join(screenshotFolder, `${name}.png`), fullPage: true })
}
