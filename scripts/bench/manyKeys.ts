/**
 * Goal 4: RSS of the service under default Node flags after 1,000,000 distinct keys
 * (BENCH_KEYS) have each made one signed call. The keys are written to the store
 * directly, in batches (an HTTP create per key would take an hour). The keys call a
 * service process of their own, on the same data: the run's main service has by then
 * carried goals 1-2's loads and goal 5's import, whose heap V8 keeps (its RSS after the
 * whole run is the table's last row), and the goal is what a million keys cost.
 */
import type { SigningKey } from '../../kernel/auth/signature.ts'
import { openDatabase } from '../../kernel/storage/database.ts'
import { loadMasterKey, SecretBox } from '../../kernel/auth/secrets.ts'
import { newKeyCredentials } from '../../kernel/auth/keyIssuer.ts'
import type { BenchContext } from './context.ts'
import { call, measure, summarise } from './load.ts'
import { rssMegabytes, startService, stop } from './processes.ts'
import { databaseUrl } from './settings.ts'
import { figure, shortOf, type Target } from './goals.ts'

const goalKeys = 1_000_000
const keyCount = Number(process.env.BENCH_KEYS ?? goalKeys)
const settleSeconds = 10

async function seedKeys(dataDir: string, count: number, groupIds: number[]): Promise<SigningKey[]> {
  const database = openDatabase({ databaseUrl, dataDir })
  const box = new SecretBox(loadMasterKey(null, dataDir))
  const keys: SigningKey[] = []
  const now = Date.now()
  const batch = 2000
  for (let offset = 0; offset < count; offset += batch) {
    const rows: { api_key: string; secret_enc: string; display_name: string; parent: number; custno: number; require_https: number; max_hits: string; created_at: number; updated_at: number }[] = []
    for (let index = offset; index < Math.min(count, offset + batch); index++) {
      const credentials = newKeyCredentials()
      keys.push({ apiKey: credentials.apiKey, secret: credentials.secret })
      rows.push({ api_key: credentials.apiKey, secret_enc: box.seal(credentials.secret, credentials.apiKey), display_name: `bench ${index}`, parent: 1000, custno: 0, require_https: 0, max_hits: '1000/1Sec', created_at: now, updated_at: now })
    }
    await database.db.transaction().execute(async (trx) => {
      await trx.insertInto('api_keys').values(rows).execute()
      const ids = await trx.selectFrom('api_keys').select('id').where('api_key', 'in', rows.map((row) => row.api_key)).execute()
      await trx.insertInto('api_key_groups').values(ids.flatMap((row) => groupIds.map((groupId) => ({ key_id: Number(row.id), group_id: groupId })))).execute()
    })
    if (offset % 100_000 === 0) process.stdout.write(`  seeded ${offset} keys\r`)
  }
  await database.close()
  return keys
}

export async function manyKeysGoal(context: BenchContext): Promise<void> {
  const { rows, goals } = context
  const started = Date.now()
  // One group per key, one that grants the called path.
  const { json: groups } = await call(context.service.base, context.admin, 'GET', '/Api/Read/Groups')
  const granting = (groups as { Id: number; Paths: string[] }[]).find((group) => group.Paths.some((path) => /^\/api\/read\/(acl|\*)$|^\/\*$|^\*$/i.test(path)))
  const keys = await seedKeys(context.dataDir, keyCount, granting ? [granting.Id] : context.groupIds)
  console.log(`  (seeded ${keyCount} keys in ${((Date.now() - started) / 1000).toFixed(1)} s)`)
  const service = await startService(context.dataDir)
  context.children.push(service.child)
  // One call first: a seeded key that cannot call would make the whole run measure refusals.
  await call(service.base, keys[0], 'GET', '/Api/Read/Acl')
  let next = 1
  const rssBefore = rssMegabytes(service.child.pid!)
  const measured = await measure(service.base + '/Api/Read/Acl', {
    method: 'GET', path: '/Api/Read/Acl',
    next: () => ({ key: keys[next++ % keys.length] }),
  }, { amount: keys.length, seconds: Number(process.env.BENCH_KEYS_SECONDS ?? 900) })
  const called = Math.min(next, keys.length)
  const rss = rssMegabytes(service.child.pid!)
  // The goal is judged on the RSS at the load's end; beside it, the RSS once V8's memory
  // reducer has had an idle moment (it collects and gives pages back after the allocation
  // rate drops), which is what an operator sees on a quiet service.
  await new Promise((resolve) => setTimeout(resolve, settleSeconds * 1000))
  const settled = rssMegabytes(service.child.pid!)
  rows.push(summarise(`GET /Api/Read/Acl, each call a different one of ${keyCount} keys`, measured, context.bareRate, `${called} distinct keys called, service RSS ${Math.round(rss)} MB (${Math.round(settled)} MB ${settleSeconds} s later)`))
  const flags = process.env.BENCH_SERVICE_NODE_OPTIONS ? `NODE_OPTIONS=${process.env.BENCH_SERVICE_NODE_OPTIONS}` : 'default Node flags'
  const short = shortOf(called, goalKeys, 'keys')
  await stop(service.child)
  const rssLimit = 300
  const rssMet: Target = (value) => value < rssLimit
  goals.add(4, 'memory', `RSS ${figure(rss, 0, rssMet)} MB after ${called} distinct keys each called once (target < ${rssLimit} MB; ${Math.round(rssBefore)} MB before, ${Math.round(settled)} MB after ${settleSeconds} s idle; a service process of its own), ${measured.result.non2xx} non-2xx, ${flags}${short}`,
    rssMet(rss) && called >= goalKeys && measured.result.non2xx === 0 && !process.env.BENCH_SERVICE_NODE_OPTIONS)
}
