/**
 * Issue 14.8: the documentation's examples work when followed in order. Every fenced
 * `sh` block preceded by `<!-- test: run -->` in README.md, docs/keys.md and
 * docs/people.md runs, one bash script per document (`set -euo pipefail`, so shell
 * variables carry from block to block), against a fresh service started here; the
 * signing client and the admin CLI find it through the same PORT/DATA_DIR/DATABASE_URL
 * the service uses. Any non-zero exit (the client exits 1 on a non-2xx status) fails.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { forEachDatabase, startService } from './helpers/service.ts'

const documents = ['README.md', 'docs/keys.md', 'docs/people.md']
const marker = '<!-- test: run -->'

/** The runnable blocks of one document, in order. */
export function runnableBlocks(markdown: string): string[] {
  const lines = markdown.split('\n')
  const blocks: string[] = []
  for (let index = 0; index < lines.length; index++) {
    if (lines[index].trim() !== marker) continue
    const fence = lines[index + 1]?.trim()
    if (fence !== '```sh') throw new Error(`line ${index + 2}: "${marker}" must be followed by a \`\`\`sh block`)
    const end = lines.indexOf('```', index + 2)
    if (end === -1) throw new Error(`line ${index + 2}: unterminated block`)
    blocks.push(lines.slice(index + 2, end).join('\n'))
    index = end
  }
  return blocks
}

function bash(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

t.test('the marker finds blocks, and each document has some', async (t) => {
  t.same(runnableBlocks(`x\n${marker}\n\`\`\`sh\necho 1\necho 2\n\`\`\`\n\`\`\`sh\nnot run\n\`\`\`\n`), ['echo 1\necho 2'])
  t.throws(() => runnableBlocks(`${marker}\n\`\`\`\nplain\n\`\`\`\n`), /must be followed by a ```sh block/)
  for (const document of documents) t.ok(runnableBlocks(readFileSync(document, 'utf8')).length >= 1, `${document} has runnable examples`)
})

/** The UTC day, as the day code and daily credit refills count it. */
const utcDay = () => new Date().toISOString().slice(0, 10)

for (const document of documents) {
  t.test(`${document}: its examples run in order on a fresh service`, (t) =>
    forEachDatabase(t, async (t, kind) => {
      const blocks = runnableBlocks(readFileSync(document, 'utf8'))
      // Each block is announced on stderr, so a failure names the block it happened in.
      const script = ['set -euo pipefail', ...blocks.map((block, index) => `echo "== block ${index + 1} of ${blocks.length}" >&2\n${block}`)].join('\n')
      const run = async () => {
        const service = await startService(t, { kind })
        const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(service.port), DATA_DIR: service.config.dataDir }
        for (const name of ['DATABASE_URL', 'HOST', 'BASE_PATH', 'CONFIG_FILE', 'KEYGATE_API_KEY', 'KEYGATE_API_SECRET', 'MASTER_KEY']) delete env[name]
        if (service.config.databaseUrl) env.DATABASE_URL = service.config.databaseUrl
        const day = utcDay()
        return { ...(await bash(script, env)), crossedMidnight: utcDay() !== day }
      }
      let result = await run()
      // The examples read a day code once and show a daily refill's count: a run that
      // spans 00:00 UTC sees the code go stale or the credits refill, as documented.
      // It is run again, on a fresh service, rather than failed for the clock.
      if (result.code !== 0 && result.crossedMidnight) result = await run()
      t.equal(result.code, 0, `${document} ran through`, { stdout: result.stdout.slice(-3000), stderr: result.stderr.slice(-3000) })
    }))
}
