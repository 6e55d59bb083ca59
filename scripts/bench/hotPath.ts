/**
 * Goals 1 and 2: signed, ACL-checked, rate-limited `GET /Api/Read/Acl` at LogLevel 0
 * against the bare node:http server, and at LogLevel 2 against LogLevel 0. The machine
 * is shared, so the three are measured in alternating runs (bare, level 0, level 2,
 * bare, ...) and each ratio is the median of the rounds' own ratios: a round's figures
 * were taken under the same load from elsewhere.
 */
import type { BenchContext } from './context.ts'
import { ms, ratio, type Target } from './goals.ts'
import { measure, median, summarise, type Load, type Row } from './load.ts'
import { databaseName, rounds } from './settings.ts'

const path = '/Api/Read/Acl'

export async function hotPathGoals(context: BenchContext, { level2 }: { level2: boolean }): Promise<void> {
  const { bare, service, reader, rows, goals } = context
  const level0: Load = { method: 'GET', path, key: reader }
  const level2Load: Load = { ...level0, headers: { 'x-loglevel': '2' } }
  const measured: { bare: Row; level0: Row; level2?: Row }[] = []
  for (let round = 1; round <= rounds; round++) {
    console.log(`  round ${round} of ${rounds}`)
    const bareRow = summarise(`bare node:http (round ${round})`, await measure(bare.url, level0, { serverPid: bare.child.pid }), null)
    const level0Row = summarise(`GET ${path} (signed, ACL, rate limit, log level 0, cached; round ${round})`, await measure(service.base + path, level0, { serverPid: service.child.pid }), bareRow.requestsPerSecond)
    const level2Row = level2 ? summarise(`GET ${path} at x-LogLevel 2 (round ${round})`, await measure(service.base + path, level2Load, { serverPid: service.child.pid }), bareRow.requestsPerSecond) : undefined
    rows.push(bareRow, level0Row, ...(level2Row ? [level2Row] : []))
    measured.push({ bare: bareRow, level0: level0Row, level2: level2Row })
  }
  const throughput = median(measured.map((round) => round.level0.requestsPerSecond / round.bare.requestsPerSecond))
  const p99Ratio = median(measured.map((round) => round.level0.p99 / Math.max(round.bare.p99, 1)))
  const bareP99 = median(measured.map((round) => round.bare.p99))
  const level0P99 = median(measured.map((round) => round.level0.p99))
  const target = databaseName === 'sqlite' ? 0.9 : 0.8
  const throughputMet: Target = (value) => value >= target
  const p99Limit = 1.5
  const p99Met: Target = (value) => value <= p99Limit
  const cpu = (row: 'bare' | 'level0' | 'level2') => median(measured.map((round) => round[row]!.serverMicrosPerCall!))
  goals.add(1, 'acl', `${ratio(throughput, throughputMet)} bare (target >= ${target}), p99 ${ms(level0P99)} vs bare ${ms(bareP99)} = ${ratio(p99Ratio, p99Met)} (target <= ${p99Limit}); server CPU ${cpu('level0')} vs bare ${cpu('bare')} µs/call; median of ${rounds} alternating runs`,
    throughputMet(throughput) && p99Met(p99Ratio))
  if (level2) {
    const level2Ratio = median(measured.map((round) => round.level2!.requestsPerSecond / round.level0.requestsPerSecond))
    const level2P99 = median(measured.map((round) => round.level2!.p99))
    const level2Target = 0.85
    const level2Met: Target = (value) => value >= level2Target
    goals.add(2, 'log2', `${ratio(level2Ratio, level2Met)} level 0 (target >= ${level2Target}), p99 ${ms(level2P99)} vs level 0 ${ms(level0P99)}; server CPU ${cpu('level2')} vs ${cpu('level0')} µs/call; median of ${rounds} alternating runs`, level2Met(level2Ratio))
  }
}
