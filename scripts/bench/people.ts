/**
 * Issue 19, goals 3 and 5 (`BENCH_ONLY=people-goals npm run bench`, with DATABASE_URL
 * for MariaDB): imports BENCH_PEOPLE (100,000) people through the API, in batches of
 * 10,000 as an HR system would (importinit, importmass, importterm), timing it and
 * reading the service's peak RSS, beside the database's own time to write the same rows
 * (importFloor.ts); then loads GET /People/Read/Missing with the response
 * cache off (a second service process on the same data, CACHE_RESPONSES=false) for the
 * first page, a page past 90 % of the list by page number, and the same page by cursor,
 * after 3 s of the first page's load that are not counted (the process is new).
 * BENCH_PEOPLE_CASES (`first,number,cursor`) chooses which of the three run, in which
 * order; the uncounted load is then of the first one named.
 * That process is one (WORKERS=1) unless BENCH_PEOPLE_WORKERS says otherwise; with more,
 * the goal's lines name them and the server's CPU per call is not given (the pid read
 * is the cluster's primary, which serves no call).
 * Each goal is printed as one line, met or not, with its numbers.
 */
import { readFileSync } from 'node:fs'
import type { BenchContext } from './context.ts'
import { figure, ms, shortOf, type Target } from './goals.ts'
import { importFloor } from './importFloor.ts'
import { call, measure, summarise } from './load.ts'
import { startService } from './processes.ts'
import { databaseUrl, peopleCases, peopleWorkers, type PeopleCase } from './settings.ts'

const batchSize = 10_000
const listingTarget = 20
/** The uncached service's load before goal 3's measured ones (not counted). */
const warmUpSeconds = 3
/** Goals 3 and 5 are over 100,000 people: a smaller BENCH_PEOPLE measures, it does not meet them. */
const goalPeople = 100_000
const importTargets = { sqlite: 4, mariadb: 8 }

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

/**
 * Goal 5: the import, timed from importinit to importterm's answer, between two timings
 * of the database alone writing the same rows (its speed moves within minutes here).
 * A function of its own so the roster is garbage before goal 3's load.
 */
async function importGoal(context: BenchContext, database: 'sqlite' | 'mariadb', peopleCount: number): Promise<void> {
  const { service, admin, rows, goals } = context
  const base = service.base
  const roster = Array.from({ length: peopleCount }, (_, index) => person(index))
  const floorBefore = await importFloor(context.dataDir, roster, batchSize)
  const rssBefore = memory(service.child.pid!, 'VmRSS')
  const started = performance.now()
  const { json: { ImportId } } = await call(base, admin, 'POST', '/people/update/importinit', {})
  for (let from = 0; from < peopleCount; from += batchSize) {
    const people = roster.slice(from, from + batchSize)
    const { json: batch } = await call(base, admin, 'POST', '/people/update/importmass', { ImportId, People: people })
    if (batch.Rejected !== 0) throw new Error(`import rejected rows: ${JSON.stringify(batch.Rejections.slice(0, 3))}`)
  }
  await call(base, admin, 'POST', '/people/update/importterm', { ImportId })
  const seconds = (performance.now() - started) / 1000
  const peak = memory(service.child.pid!, 'VmHWM')
  const target = importTargets[database]
  const floorAfter = await importFloor(context.dataDir, roster, batchSize)
  const floor = (floorBefore + floorAfter) / 2
  const floorText = `the database alone writes the same rows in ${floorBefore.toFixed(1)} s before and ${floorAfter.toFixed(1)} s after, so the service adds about ${(seconds - floor).toFixed(1)} s`
  const importMet: Target = (value) => value < target
  goals.add(5, 'import', `${figure(seconds, 1, importMet)} s for ${peopleCount} people (target < ${target} s), in batches of ${batchSize}, service peak RSS ${peak} MB (${rssBefore} MB before); ${floorText}${shortOf(peopleCount, goalPeople, 'people')}`,
    importMet(seconds) && peopleCount >= goalPeople)
  rows.push({ scenario: `goal 5: import ${peopleCount} people (s)`, requestsPerSecond: 0, p50: 0, p99: 0, ratioToBare: null, non2xx: 0, errors: 0, note: `${seconds.toFixed(1)} s, peak RSS ${peak} MB; ${floorText}` })
}

export async function peopleGoals(context: BenchContext, peopleCount: number): Promise<void> {
  const { reader, rows, goals } = context
  const database = databaseUrl ? 'mariadb' : 'sqlite'

  await importGoal(context, database, peopleCount)

  // Goal 3: listings with the response cache off (Total and page anchors are still remembered).
  const uncached = await startService(context.dataDir, { CACHE_RESPONSES: 'false', WORKERS: String(peopleWorkers) })
  const processes = peopleWorkers === 1 ? '' : `, WORKERS=${peopleWorkers}`
  context.children.push(uncached.child)
  try {
    const size = 100
    const { json: first } = await call(uncached.base, reader, 'GET', `/People/Read/Missing?size=${size}`)
    const pages = Math.ceil(first.Total / size)
    const deep = Math.floor(pages * 0.95)
    // The cursor that starts the deep page: the Next of the page before it.
    const { json: beforeDeep } = await call(uncached.base, reader, 'GET', `/People/Read/Missing?size=${size}&page=${deep - 1}`)
    const byName: Record<PeopleCase, [string, string] | null> = {
      first: ['first page', `/People/Read/Missing?size=${size}`],
      number: [`page ${deep} of ${pages} by number`, `/People/Read/Missing?size=${size}&page=${deep}`],
      cursor: beforeDeep.Next ? [`page ${deep} of ${pages} by cursor`, `/People/Read/Missing?size=${size}&after=${beforeDeep.Next}`] : null,
    }
    const cases = peopleCases.map((name) => byName[name]).filter((chosen) => chosen !== null)
    // Only `cursor` asked for, and a list too short for the page before the deep one to have a Next.
    if (cases.length === 0) return
    const p99Met: Target = (value) => value < listingTarget
    // This process has just started: its first seconds under load (the listing's code
    // compiled by V8, its heap grown) are not what a p99 under steady load means, and
    // fell on the first case only. A few seconds of the first case first, not counted.
    await measure(uncached.base + cases[0][1], { method: 'GET', path: cases[0][1], key: reader }, { seconds: warmUpSeconds })
    for (const [name, path] of cases) {
      const measured = await measure(uncached.base + path, { method: 'GET', path, key: reader }, { serverPid: peopleWorkers === 1 ? uncached.child.pid : undefined })
      const { result } = measured
      goals.add(3, `people ${name}${processes}`, `p99 ${ms(result.latency.p99, p99Met)} (target < ${listingTarget} ms); ${Math.round(result.requests.average)} req/s, p50 ${ms(result.latency.p50)}, non-2xx ${result.non2xx}${shortOf(peopleCount, goalPeople, 'people')}`,
        p99Met(result.latency.p99) && result.non2xx === 0 && peopleCount >= goalPeople)
      rows.push(summarise(`goal 3: GET /People/Read/Missing ${name}, ${first.Total} of ${peopleCount} people missing a photo, uncached${processes}`, measured, null))
    }
  } finally {
    uncached.child.kill('SIGTERM')
  }
}
