/**
 * The SQLite store failing under the service: the file locked by another process, and
 * the data folder's disk full. Each answers 503 (never a crash or a half-written
 * record), the service keeps answering what needs no write (on a locked file even
 * while a write waits for the lock), and it recovers by itself.
 */
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import SQLite from 'better-sqlite3'
import { startService } from './helpers/service.ts'

t.test('the SQLite file locked by another process', async (t) => {
  const service = await startService(t, { kind: 'sqlite' })
  const other = new SQLite(join(service.config.dataDir, 'keygate.sqlite'))
  t.teardown(() => other.close())
  const person = { FirstName: 'Locked', LastName: 'Out' }
  t.equal((await service.call('POST', '/People/Update/OneChange', { body: person })).status, 200)
  t.equal((await service.call('GET', '/Api/Read/Acl')).status, 200, 'the ACL answer is cached from here on')

  other.exec('begin exclusive')
  const started = Date.now()
  let writeAnswered = false
  const write = service.call('POST', '/People/Update/OneChange', { body: person }).finally(() => (writeAnswered = true))
  // The write waits for the lock by now. SQLite's own wait (busy_timeout) stopped the
  // whole process, this test's timers included, until the write gave up.
  await sleep(300)
  const health = await fetch(`http://127.0.0.1:${service.port}/healthz`)
  t.equal(health.status, 200, '/healthz answers while a write waits for the lock')
  const acl = await service.call('GET', '/Api/Read/Acl')
  t.same([acl.status, acl.headers.get('x-cache')], [200, 'HIT'], 'a cached answer too')
  const read = await service.call('POST', '/people/read/list', { body: {} })
  t.same([read.status, read.json?.Total], [200, 1], 'and a plain read')
  t.notOk(writeAnswered, 'all of them before the write gave up')
  t.ok(Date.now() - started < 2000, `all of them at once (${Date.now() - started} ms after the write began)`)
  const refused = await write
  t.equal(refused.status, 503, `the write waits for the lock, then answers 503 after ${Date.now() - started} ms`)
  t.equal(refused.text, 'Error: Service temporarily unavailable, try again shortly.')

  // A write that meets the lock and outlives it is written once the lock is gone.
  const waiting = service.call('POST', '/People/Update/OneChange', { body: person })
  await sleep(300)
  other.exec('rollback')
  t.equal((await waiting).status, 200, 'a write waiting when the lock goes is written')
  t.equal((await service.call('POST', '/People/Update/OneChange', { body: person })).status, 200, 'writes work again once the lock is gone')
  const people = await service.call('POST', '/people/read/list', { body: {} })
  t.equal(people.json.Total, 3, 'the refused write left no record behind')
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
