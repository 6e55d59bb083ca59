/**
 * The SQLite store failing under the service: the file locked by another process, and
 * the data folder's disk full. Each answers 503 (never a crash or a half-written
 * record), the service keeps answering what needs no write, and it recovers by itself.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import SQLite from 'better-sqlite3'
import { startService } from './helpers/service.ts'

t.test('the SQLite file locked by another process', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const other = new SQLite(join(service.config.dataDir, 'keygate.sqlite'))
  t.teardown(() => other.close())
  const person = { FirstName: 'Locked', LastName: 'Out' }
  t.equal((await service.call('POST', '/People/Update/OneChange', { body: person })).status, 200)

  other.exec('begin exclusive')
  const started = Date.now()
  const refused = await service.call('POST', '/People/Update/OneChange', { body: person })
  t.equal(refused.status, 503, `a write waits for the lock (busy_timeout), then answers 503 after ${Date.now() - started} ms`)
  t.equal(refused.text, 'Error: Service temporarily unavailable, try again shortly.')
  other.exec('rollback')

  t.equal((await service.call('POST', '/People/Update/OneChange', { body: person })).status, 200, 'writes work again once the lock is gone')
  const people = await service.call('POST', '/people/read/list', { body: {} })
  t.equal(people.json.Total, 2, 'the refused write left no record behind')
  t.equal(other.pragma('integrity_check', { simple: true }), 'ok', 'the file is intact')
})

const isRoot = process.getuid?.() === 0
t.test('the data folder\'s disk full', { skip: isRoot ? false : 'mounting a small tmpfs needs root (CI runs as root)' }, async (t) => {
  const mountPoint = mkdtempSync(join(tmpdir(), 'keygate-full-'))
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', mountPoint])
  t.teardown(() => {
    execFileSync('umount', ['-l', mountPoint])
    rmSync(mountPoint, { recursive: true, force: true })
  })
  const dataDir = join(mountPoint, 'data')
  mkdirSync(dataDir)
  const service = await startService(t, { kind: 'sqlite', config: { dataDir } })
  t.equal((await service.call('POST', '/People/Update/OneChange', { body: { LastName: 'Before' } })).status, 200)

  // Fill what is left of the disk.
  const filler = join(mountPoint, 'filler')
  try {
    writeFileSync(filler, Buffer.alloc(8 * 1024 * 1024))
  } catch {
    // ENOSPC: the disk is now full, as intended
  }
  let status = 0
  for (let attempt = 0; attempt < 50 && status !== 503; attempt++) {
    status = (await service.call('POST', '/People/Update/OneChange', { body: { LastName: `Full ${attempt}`, Dept: 'x'.repeat(90) } })).status
  }
  t.equal(status, 503, 'a write on a full disk answers 503')
  t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200, 'calls that need no write still answer')

  rmSync(filler, { force: true })
  t.equal((await service.call('POST', '/People/Update/OneChange', { body: { LastName: 'After' } })).status, 200, 'writes work again once there is room')
  const check = new SQLite(join(dataDir, 'keygate.sqlite'), { readonly: true })
  t.equal(check.pragma('integrity_check', { simple: true }), 'ok', 'the file is intact')
  check.close()
})
