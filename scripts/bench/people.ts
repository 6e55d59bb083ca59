/**
 * Issue 19, goals 3 and 5 (`BENCH_ONLY=people-goals npm run bench`, with DATABASE_URL
 * for MariaDB): imports BENCH_PEOPLE (100,000) people through the API, in batches of
 * 10,000 as an HR system would (importinit, importmass, importterm), timing it and
 * reading the service's peak RSS; then loads GET /People/Read/Missing with the response
 * cache off (a second service process on the same data, CACHE_RESPONSES=false) for the
 * first page, a page past 90 % of the list by page number, and the same page by cursor.
 * Each goal is printed as one line, met or not, with its numbers.
 */
import { readFileSync } from 'node:fs'
import type { ChildProcess } from 'node:child_process'
import type autocannon from 'autocannon'
import type { SigningKey } from '../../kernel/auth/signature.ts'

/** What bench.ts lends: its service, keys and measuring helpers. */
export interface PeopleBenchContext {
  base: string
  servicePid: number
  admin: SigningKey
  reader: SigningKey
  database: 'sqlite' | 'mysql'
  peopleCount: number
  call(base: string, key: SigningKey, method: string, path: string, body?: unknown): Promise<{ json: any }>
  measure(url: string, load: { method: 'GET'; path: string; key: SigningKey }): Promise<autocannon.Result>
  startService(extraEnv: Record<string, string>): Promise<{ base: string; child: ChildProcess }>
}

export interface GoalRow {
  scenario: string
  requestsPerSecond: number
  p50: number
  p99: number
  ratioToBare: null
  non2xx: number
  errors: number
  note?: string
}

const batchSize = 10_000
const listingTarget = 20
const importTargets = { sqlite: 4, mysql: 8 }

function memory(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Math.round(Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)![1]) / 1024)
}

const departments = ['Sales', 'IT', 'HR', 'Finance', 'Support', 'Research']

/** One person of the roster; one in ten already has a photo, so the missing-photo listing is 90 % of it. */
function person(index: number) {
  return {
    Source_Id: `G${index}`, Emp_Id: String(index), FirstName: `First${index % 5003}`, LastName: `Last${(index * 7919) % 20011}`,
    Email: `person${index}@example.com`, Dept: departments[index % departments.length], Gender: ['M', 'F', 'U'][index % 3],
    HireDate: '2018-03-01', Phone: '+1 555 0100', Photo: index % 10 === 0 ? `https://photos.example/${index}.jpg` : null,
  }
}

const verdict = (met: boolean) => (met ? 'MET' : 'NOT MET')

export async function peopleGoals(context: PeopleBenchContext): Promise<GoalRow[]> {
  const { base, admin, reader, database, peopleCount } = context
  const rows: GoalRow[] = []

  // Goal 5: the import, timed from importinit to importterm's answer.
  const rssBefore = memory(context.servicePid, 'VmRSS')
  const started = performance.now()
  const { json: { ImportId } } = await context.call(base, admin, 'POST', '/people/update/importinit', {})
  for (let from = 0; from < peopleCount; from += batchSize) {
    const people = Array.from({ length: Math.min(batchSize, peopleCount - from) }, (_, offset) => person(from + offset))
    const { json: batch } = await context.call(base, admin, 'POST', '/people/update/importmass', { ImportId, People: people })
    if (batch.Rejected !== 0) throw new Error(`import rejected rows: ${JSON.stringify(batch.Rejections.slice(0, 3))}`)
  }
  await context.call(base, admin, 'POST', '/people/update/importterm', { ImportId })
  const seconds = (performance.now() - started) / 1000
  const peak = memory(context.servicePid, 'VmHWM')
  const target = importTargets[database]
  console.log(`goal 5 import ${database}: ${seconds.toFixed(1)} s (target < ${target}) ${verdict(seconds < target)}; ${peopleCount} people in batches of ${batchSize}, service peak RSS ${peak} MB (${rssBefore} MB before)`)
  rows.push({ scenario: `goal 5: import ${peopleCount} people (s)`, requestsPerSecond: 0, p50: 0, p99: 0, ratioToBare: null, non2xx: 0, errors: 0, note: `${seconds.toFixed(1)} s, peak RSS ${peak} MB` })

  // Goal 3: listings with the response cache off (Total and page anchors are still remembered).
  const uncached = await context.startService({ CACHE_RESPONSES: 'false' })
  try {
    const size = 100
    const { json: first } = await context.call(uncached.base, reader, 'GET', `/People/Read/Missing?size=${size}`)
    const pages = Math.ceil(first.Total / size)
    const deep = Math.floor(pages * 0.95)
    // The cursor that starts the deep page: the Next of the page before it.
    const { json: beforeDeep } = await context.call(uncached.base, reader, 'GET', `/People/Read/Missing?size=${size}&page=${deep - 1}`)
    const cases: [string, string][] = [
      ['first page', `/People/Read/Missing?size=${size}`],
      [`page ${deep} of ${pages} by number`, `/People/Read/Missing?size=${size}&page=${deep}`],
    ]
    // (A version without keyset paging answers no Next: then there is no cursor case.)
    if (beforeDeep.Next) cases.push([`page ${deep} of ${pages} by cursor`, `/People/Read/Missing?size=${size}&after=${beforeDeep.Next}`])
    for (const [name, path] of cases) {
      const result = await context.measure(uncached.base + path, { method: 'GET', path, key: reader })
      const met = result.latency.p99 < listingTarget && result.non2xx === 0
      console.log(`goal 3 people ${name} ${database}: p99 ${result.latency.p99} ms (target < ${listingTarget}) ${verdict(met)}; ${Math.round(result.requests.average)} req/s, p50 ${result.latency.p50} ms, non-2xx ${result.non2xx}`)
      rows.push({
        scenario: `goal 3: GET /People/Read/Missing ${name}, ${first.Total} of ${peopleCount} people missing a photo, uncached`,
        requestsPerSecond: Math.round(result.requests.average), p50: result.latency.p50, p99: result.latency.p99, ratioToBare: null,
        non2xx: result.non2xx, errors: result.errors + result.timeouts,
      })
    }
  } finally {
    uncached.child.kill('SIGTERM')
  }
  return rows
}
