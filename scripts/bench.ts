/**
 * `npm run bench`: autocannon against the real service (a child process on a fresh data
 * folder; MySQL when DATABASE_URL is set) and, in the same run, against a bare node:http
 * server answering the very bytes of the measured call, so every figure is also a ratio to that ceiling.
 * Each issue-19 goal is printed as one line, MET / NOT MET with its figures (goals.ts);
 * the scenarios live in modules under scripts/bench/.
 *
 * Environment: BENCH_SECONDS (10), BENCH_CONNECTIONS (50), BENCH_ROUNDS (3: alternating
 * runs for goals 1 and 2), BENCH_PEOPLE (100000), BENCH_PEOPLE_WORKERS (1: the processes
 * goal 3's listings are loaded on), BENCH_PEOPLE_CASES (first,number,cursor: which of goal
 * 3's loads run, in that order), BENCH_KEYS (1000000), BENCH_ONLY
 * (comma-separated scenario names: acl, acl-log2, log, create, people, people-uncached,
 * people-goals, keys, workers, three-redis, profile), BENCH_REDIS_URL (for workers/three-redis on MySQL;
 * default the local Redis under a key prefix of its own), BENCH_OUT
 * (bench-results/latest.json), BENCH_PROFILE_DIR (bench-results/prof),
 * BENCH_SERVICE_NODE_OPTIONS (node flags for the service process only),
 * BENCH_SERVICE_NODE_ARGS (flags NODE_OPTIONS refuses, e.g. `--cpu-prof --cpu-prof-dir=prof`),
 * BENCH_SERVICE_FROM=sources (run the service under tsx instead of the built dist/),
 * BENCH_KEEP=1 (keep the run's data folder, its path printed at the end).
 * Every request is signed (the signature is reused within one second, as a real client may).
 */
import type { ChildProcess } from 'node:child_process'
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir, totalmem } from 'node:os'
import { dirname, join } from 'node:path'
import type { SigningKey } from '../kernel/auth/signature.ts'
import { openDatabase } from '../kernel/storage/database.ts'
import { loadMasterKey, SecretBox } from '../kernel/auth/secrets.ts'
import { dayCodeAt } from '../kernel/auth/dayCode.ts'
import { loadDaySecret } from '../kernel/boot/bootstrap.ts'
import { benchRoot, connections, databaseName, databaseUrl, seconds } from './bench/settings.ts'
import { call, measure, summarise, type Row } from './bench/load.ts'
import { rssMegabytes, startBare, startService } from './bench/processes.ts'
import { GoalReport } from './bench/goals.ts'
import type { BenchContext } from './bench/context.ts'
import { hotPathGoals } from './bench/hotPath.ts'
import { manyKeysGoal } from './bench/manyKeys.ts'
import { scalingGoal } from './bench/scaling.ts'
import { profileGoal } from './bench/profile.ts'
import { peopleGoals } from './bench/people.ts'

const peopleCount = Number(process.env.BENCH_PEOPLE ?? 100_000)
const only = process.env.BENCH_ONLY?.split(',').map((name) => name.trim())
const outFile = process.env.BENCH_OUT ?? join(benchRoot, 'bench-results', 'latest.json')

async function seedPeople(base: string, admin: SigningKey): Promise<void> {
  const { json: started } = await call(base, admin, 'POST', '/people/update/importinit', {})
  for (let offset = 0; offset < peopleCount; offset += 10_000) {
    const people: Record<string, unknown>[] = []
    for (let index = offset; index < Math.min(peopleCount, offset + 10_000); index++) {
      people.push({ Source_Id: `B${index}`, Emp_Id: String(index), FirstName: `First${index % 5003}`, LastName: `Last${(index * 7919) % 20011}`, Dept: 'Bench', Photo: index % 10 === 0 ? `https://photos.example/${index}.jpg` : null })
    }
    await call(base, admin, 'POST', '/people/update/importmass', { ImportId: started.ImportId, People: people })
  }
  await call(base, admin, 'POST', '/people/update/importterm', { ImportId: started.ImportId })
}

async function main(): Promise<void> {
  const wanted = (name: string) => !only || only.includes(name)
  const dataDir = mkdtempSync(join(tmpdir(), 'keygate-bench-'))
  const rows: Row[] = []
  const goals = new GoalReport()
  const children: ChildProcess[] = []
  const stopAll = () => children.forEach((child) => child.exitCode === null && child.kill('SIGTERM'))
  process.on('exit', stopAll)
  try {
    console.log(`keygate benchmark: ${seconds}s per scenario, ${connections} connections, ${databaseUrl ? 'MySQL/MariaDB' : 'SQLite'}; ${cpus().length} cores (${cpus()[0]?.model}), ${Math.round(totalmem() / 2 ** 30)} GiB`)
    const service = await startService(dataDir)
    children.push(service.child)
    const stored = JSON.parse(readFileSync(join(dataDir, 'admin-key.json'), 'utf8'))
    const admin: SigningKey = { apiKey: stored.Api_Key, secret: stored.Api_Secret }
    const daySecretDatabase = openDatabase({ databaseUrl, dataDir })
    const daySecret = await loadDaySecret(daySecretDatabase.db, new SecretBox(loadMasterKey(null, dataDir)))
    await daySecretDatabase.close()
    const today = () => dayCodeAt(daySecret, Date.now())

    // A rate-limited key at LogLevel 0 holding every group the admin may assign.
    const { json: groups } = await call(service.base, admin, 'GET', '/Api/Read/Groups')
    const groupIds: number[] = groups.map((group: { Id: number }) => group.Id)
    const { json: created } = await call(service.base, admin, 'POST', '/Api/Create/Key', {
      Display_Name: 'bench reader', GroupId: groupIds, Require_Https: 0, LogLevel: 0, MaxHits: '1000000/1Sec,100000000/1Hour',
    }, today())
    const reader: SigningKey = { apiKey: created.Api_Key, secret: created.Api_Secret }
    const answered = await call(service.base, reader, 'GET', '/Api/Read/Acl')
    const bare = await startBare(Buffer.from(answered.text))
    children.push(bare.child)

    console.log('\nceiling')
    // The bare server gets the very same signed requests, so the client's own work per
    // request is identical in both measurements and the ratio compares servers only.
    const bareResult = await measure(bare.url, { method: 'GET', path: '/Api/Read/Acl', key: reader })
    const bareRate = bareResult.result.requests.average
    rows.push(summarise('bare node:http', bareResult, bareRate))
    const context: BenchContext = { dataDir, service, bare, bareRate, admin, reader, groupIds, today, rows, goals, children }

    console.log('\nscenarios')
    if (wanted('acl') || wanted('acl-log2')) await hotPathGoals(context, { level2: wanted('acl-log2') })
    if (wanted('log')) {
      const logged = await call(service.base, reader, 'GET', '/Api/Read/Acl')
      const body = JSON.stringify({ LogRequestId: Number(logged.headers.get('x-requestid')) })
      rows.push(summarise('POST /Api/Read/Log', await measure(service.base + '/Api/Read/Log', { method: 'POST', path: '/Api/Read/Log', key: reader, body }), bareRate))
    }
    if (wanted('create')) {
      let counter = 0
      rows.push(summarise('POST /Api/Create/Key', await measure(service.base + '/Api/Create/Key', {
        method: 'POST', path: '/Api/Create/Key',
        next: () => ({ key: admin, today: today(), body: JSON.stringify({ Display_Name: `bench ${process.pid} ${counter++}`, GroupId: groupIds[0], Require_Https: 0 }) }),
      }), bareRate))
    }
    // Before `people`: goal 5 times an import into an empty directory.
    if (wanted('people-goals')) await peopleGoals(context, peopleCount)
    if (wanted('people') || wanted('people-uncached')) {
      const started = Date.now()
      await seedPeople(service.base, admin)
      console.log(`  (imported ${peopleCount} people in ${((Date.now() - started) / 1000).toFixed(1)} s)`)
      const path = '/People/Read/Missing?page=2&size=100'
      if (wanted('people')) {
        rows.push(summarise(`GET /People/Read/Missing over ${peopleCount} people, cached`, await measure(service.base + path, { method: 'GET', path, key: reader }), bareRate))
      }
      if (wanted('people-uncached')) {
        // A second process on the same data with the response cache off.
        const uncached = await startService(dataDir, { CACHE_RESPONSES: 'false' })
        children.push(uncached.child)
        rows.push(summarise(`GET /People/Read/Missing over ${peopleCount} people, uncached`, await measure(uncached.base + path, { method: 'GET', path, key: reader }), bareRate))
        uncached.child.kill('SIGTERM')
      }
    }
    if (wanted('keys')) await manyKeysGoal(context)
    if (wanted('workers') || wanted('three-redis')) await scalingGoal(context, { threeRedis: wanted('three-redis') })
    if (wanted('profile')) await profileGoal(context)
    rows.push({ scenario: 'service RSS at the end (MB)', requestsPerSecond: Math.round(rssMegabytes(service.child.pid!)), p50: 0, p99: 0, ratioToBare: null, non2xx: 0, errors: 0 })

    console.log('\n| scenario | req/s | p50 ms | p99 ms | ratio to bare | non-2xx | client cores |')
    console.log('|---|---:|---:|---:|---:|---:|---:|')
    for (const row of rows) console.log(`| ${row.scenario}${row.note ? ` (${row.note})` : ''} | ${row.requestsPerSecond} | ${row.p50} | ${row.p99} | ${row.ratioToBare ?? ''} | ${row.non2xx} | ${row.clientCores ?? ''} |`)
    goals.print()
    mkdirSync(dirname(outFile), { recursive: true })
    writeFileSync(outFile, JSON.stringify({ date: new Date().toISOString(), seconds, connections, database: databaseName, cpu: cpus()[0]?.model, cores: cpus().length, goals: goals.lines, rows }, null, 2))
    console.log(`\nwritten to ${outFile}`)
  } finally {
    stopAll()
    // BENCH_KEEP=1 leaves the data folder (the SQLite file the listings were read from) to be examined.
    if (process.env.BENCH_KEEP) console.log(`data folder kept: ${dataDir}`)
    else rmSync(dataDir, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(`bench: ${(error as Error).message}`)
  process.exitCode = 1
})
