/**
 * Goal 6: several processes side by side, on the same database: one process, the same
 * with `WORKERS=2` (node:cluster), and, on MariaDB, three processes sharing Redis with
 * the client's connections spread round-robin over their ports. Every figure comes with
 * the cores the load generator itself used: client, service(s), MariaDB and Redis share
 * the machine's cores.
 */
import { cpus } from 'node:os'
import type { BenchContext } from './context.ts'
import { measure, summarise, type Load, type Row } from './load.ts'
import { startService, stop } from './processes.ts'
import { databaseUrl } from './settings.ts'

const path = '/Api/Read/Acl'
// The `three-redis` processes use Redis under a key prefix of their own (D16).
const benchRedisUrl = process.env.BENCH_REDIS_URL ?? `redis://127.0.0.1:6379/0?keyPrefix=keygate-bench-${process.pid}:`

export async function scalingGoal(context: BenchContext, { threeRedis }: { threeRedis: boolean }): Promise<void> {
  const load: Load = { method: 'GET', path, key: context.reader }
  // With MariaDB every setup shares Redis (the D16 deployment); on SQLite the one machine's limits stay in memory.
  const redis: Record<string, string> = databaseUrl ? { REDIS_URL: benchRedisUrl } : {}
  const measuredRows: Row[] = []
  const run = async (label: string, processes: number, env: Record<string, string>) => {
    const nodes = []
    for (let index = 0; index < processes; index++) {
      const node = await startService(context.dataDir, { ...redis, ...env })
      context.children.push(node.child)
      nodes.push(node)
    }
    const row = summarise(label, await measure(nodes.map((node) => node.base + path), load), context.bareRate)
    measuredRows.push(row)
    context.rows.push(row)
    for (const node of nodes) await stop(node.child)
  }
  const store = databaseUrl ? 'MariaDB + Redis' : 'SQLite'
  await run(`GET ${path}, 1 process (${store})`, 1, { WORKERS: '1' })
  await run(`GET ${path}, WORKERS=2 (${store})`, 1, { WORKERS: '2' })
  if (threeRedis && databaseUrl) await run(`GET ${path}, 3 processes (${store}, round-robin)`, 3, { WORKERS: '1' })
  const parts = measuredRows.map((row) => `${row.scenario.replace(/^GET \S+, /, '').replace(/ \(.*$/, '')} ${row.requestsPerSecond} req/s p99 ${row.p99} ms (client ${row.clientCores} cores)`)
  context.goals.add(6, 'processes', `${parts.join('; ')}; ${cpus().length} cores shared by client, service and ${databaseUrl ? 'MariaDB, Redis' : 'nothing else of ours'} (no target: side by side)`, null)
}
