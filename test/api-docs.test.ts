/**
 * README's API table and docs/api.md name every operation the default plugins mount
 * (issue 13): a route added without a line in both fails here. Rows may group
 * operations (`/OneRemove`, `/OneRecall`), so each route's last path segment must
 * appear in a table row that also names its method.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startService } from './helpers/service.ts'

const repository = join(dirname(fileURLToPath(import.meta.url)), '..')

function tableRows(file: string): string[] {
  return readFileSync(join(repository, file), 'utf8').split('\n').filter((line) => line.startsWith('| `')).map((line) => line.toLowerCase())
}

t.test('README and docs/api.md list every operation', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const routes = service.kernel.services.routes()
  for (const file of ['README.md', 'docs/api.md']) {
    const rows = tableRows(file)
    t.ok(rows.length > 10, `${file} has its API table`)
    for (const route of routes) {
      const segment = route.path.slice(route.path.lastIndexOf('/')).toLowerCase()
      const listed = rows.some((row) => row.includes(route.method.toLowerCase()) && (row.includes(`${segment}\``) || row.includes(`${segment},`) || row.includes(`${segment} `)))
      t.ok(listed, `${file} lists ${route.method} ${route.path}`)
    }
  }
})

// D14: every route is covered by a default group; which one must be findable in the docs,
// not only in the running service (a reader asked "which group lets a key read its log?").
t.test('docs/api.md names every default group and its ACL paths', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const groups = await service.call('POST', '/account/read/group')
  t.equal(groups.status, 200)
  const rows = readFileSync(join(repository, 'docs/api.md'), 'utf8').split('\n').filter((line) => line.startsWith('| **'))
  for (const group of groups.json as Array<{ Display_Name: string; Paths: string[] }>) {
    const row = rows.find((line) => line.startsWith(`| **${group.Display_Name}** |`))
    t.ok(row, `docs/api.md has a row for the default group ${group.Display_Name}`)
    for (const path of group.Paths) t.ok(row?.includes(`\`${path}\``), `its row names ${path}`)
  }
})
