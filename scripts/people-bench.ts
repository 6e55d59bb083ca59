/**
 * Measures the people plugin at size: imports 100,000 people in batches of 10,000
 * over HTTP, then times the first missing-photo page uncached, on SQLite and on
 * MariaDB (TEST_MYSQL_URL, default mysql://root@127.0.0.1:3306; skipped when unreachable).
 *
 *   npx tsx scripts/people-bench.ts [--people 100000] [--only sqlite|mysql]
 *
 * Each run uses a fresh temp data folder / database and removes it afterwards.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createScratchDatabase, mysqlProblem, mysqlServerUrl } from '../test/helpers/scratchDatabase.ts'
import { loadConfig } from '../kernel/boot/config.ts'
import { createKernel } from '../kernel/boot/kernel.ts'
import { signedHeaders, type SigningKey } from '../kernel/auth/signature.ts'

const argument = (name: string) => {
  const at = process.argv.indexOf(`--${name}`)
  return at === -1 ? undefined : process.argv[at + 1]
}
const peopleCount = Number(argument('people') ?? 100_000)
const only = argument('only')
const batchSize = 10_000

const departments = ['Sales', 'IT', 'HR', 'Finance', 'Support', 'Research']
function person(index: number) {
  return {
    Source_Id: `E${index}`, Emp_Id: String(index), FirstName: `First${index % 5003}`, LastName: `Last${(index * 7919) % 20011}`,
    Email: `person${index}@example.com`, Dept: departments[index % departments.length], Gender: ['M', 'F', 'U'][index % 3],
    HireDate: '2018-03-01', Phone: '+1 555 0100',
    // One in ten already has a photo, so the missing-photo listing is a real subset.
    Photo: index % 10 === 0 ? `https://photos.example/${index}.jpg` : null,
  }
}

async function run(kind: 'sqlite' | 'mysql') {
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-bench-'))
  const scratch = kind === 'mysql' ? await createScratchDatabase('kg_bench') : null
  const databaseUrl = scratch?.url ?? null
  const config = loadConfig({ port: 0, dataDir, databaseUrl, bodyLimit: 16 * 1024 * 1024 }, {})
  const kernel = await createKernel({ config, report: () => undefined })
  const { url } = await kernel.listen()
  const key: SigningKey = { apiKey: kernel.createdRootKey!.apiKey, secret: kernel.createdRootKey!.secret }
  const call = async (method: string, path: string, body?: unknown) => {
    const raw = body === undefined ? undefined : JSON.stringify(body)
    const headers: Record<string, string> = signedHeaders(key, method, path, raw)
    if (raw !== undefined) headers['content-type'] = 'application/json'
    const started = performance.now()
    const response = await fetch(url + path, { method, headers, body: raw })
    const text = await response.text()
    const ms = performance.now() - started
    if (response.status !== 200) throw new Error(`${method} ${path}: ${response.status} ${text.slice(0, 200)}`)
    return { ms, json: JSON.parse(text), cache: response.headers.get('x-cache') }
  }
  try {
    const { json: { ImportId } } = await call('POST', '/people/update/importinit', {})
    const importStarted = performance.now()
    const batchTimes: number[] = []
    for (let from = 1; from <= peopleCount; from += batchSize) {
      const rows = Array.from({ length: Math.min(batchSize, peopleCount - from + 1) }, (_, offset) => person(from + offset))
      const batch = await call('POST', '/people/update/importmass', { ImportId, People: rows })
      if (batch.json.Rejected !== 0) throw new Error(`rejected rows: ${JSON.stringify(batch.json.Rejections.slice(0, 3))}`)
      batchTimes.push(batch.ms)
    }
    const importMs = performance.now() - importStarted
    const term = await call('POST', '/people/update/importterm', { ImportId })

    const first = await call('GET', '/People/Read/Missing')
    const cached = await call('GET', '/People/Read/Missing')
    const deep = await call('GET', '/People/Read/Missing?page=500&size=100')
    const filtered = await call('GET', '/People/Read/Missing?filter=Dept=IT')
    const otherSort = await call('GET', '/People/Read/Missing?sort=-HireDate,Emp_Id')
    // The same listing again after a write: the write dropped the cache, so this is uncached too.
    await call('POST', '/People/Update/OneChange', { Id: 1, Title: 'Touched' })
    const afterWrite = await call('GET', '/People/Read/Missing')
    const reimport = await call('POST', '/people/update/importinit', {})
    const rows = Array.from({ length: batchSize }, (_, offset) => ({ ...person(offset + 1), Title: 'Changed' }))
    const changedBatch = await call('POST', '/people/update/importmass', { ImportId: reimport.json.ImportId, People: rows })

    const format = (ms: number) => `${ms.toFixed(1)} ms`
    console.log(`\n${kind}: ${peopleCount} people`)
    console.log(`  import: ${format(importMs)} total, batches of ${batchSize}: ${batchTimes.map((ms) => Math.round(ms)).join(', ')} ms; importterm ${format(term.ms)}`)
    console.log(`  missing-photo page 1 uncached: ${format(first.ms)} (Total ${first.json.Total}, Page ${first.json.Page})`)
    console.log(`  same page cached (${cached.cache}): ${format(cached.ms)}`)
    console.log(`  page 500 of size 100: ${format(deep.ms)}; filter Dept=IT: ${format(filtered.ms)} (Total ${filtered.json.Total}); sort -HireDate,Emp_Id: ${format(otherSort.ms)}`)
    console.log(`  page 1 uncached again after a write: ${format(afterWrite.ms)}`)
    console.log(`  re-import batch of ${batchSize} all changed: ${format(changedBatch.ms)} (Changed ${changedBatch.json.Changed})`)
  } finally {
    await kernel.close()
    rmSync(dataDir, { recursive: true, force: true })
    await scratch?.drop()
  }
}

if (only !== 'mysql') await run('sqlite')
if (only !== 'sqlite') {
  if ((await mysqlProblem()) === null) await run('mysql')
  else console.log(`\nmysql: ${mysqlServerUrl} not reachable, skipped`)
}
