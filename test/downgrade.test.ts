/**
 * A downgrade: an older version started on a database a newer one has migrated (its
 * bookkeeping holds migrations this version does not have) stops with one line and exit
 * 1, and runs nothing: no migration, no bootstrap, no write. Without the check it served,
 * old code on tables it does not know.
 */
import t from 'tap'
import type { Kysely } from 'kysely'
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, resolve, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { forEachDatabase, startService } from './helpers/service.ts'
import { freePort } from './helpers/freePort.ts'
import { watchChild } from './helpers/childService.ts'

const repository = resolve(dirname(fileURLToPath(import.meta.url)), '..')

t.test('a database migrated by a newer version is refused at start with one line, and left as it was, on both engines', (t) =>
  forEachDatabase(t, async (t, kind) => {
    const service = await startService(t, { kind })
    // The migrations tables are the migrator's own, outside the typed core tables.
    const db = service.kernel.database.db as unknown as Kysely<any>
    // What a later release would have left: a kernel migration and a people migration this version lacks.
    await db.insertInto('migrations_kernel').values({ name: '9999-from-a-later-release', timestamp: new Date().toISOString() }).execute()
    await db.insertInto('migrations_people').values({ name: '9999-from-a-later-release', timestamp: new Date().toISOString() }).execute()
    await service.stop()

    const env: NodeJS.ProcessEnv = { ...process.env, HOST: '127.0.0.1', PORT: String(await freePort()), DATA_DIR: service.config.dataDir }
    delete env.CONFIG_FILE
    delete env.NODE_OPTIONS
    delete env.MASTER_KEY
    if (service.config.databaseUrl) env.DATABASE_URL = service.config.databaseUrl
    else delete env.DATABASE_URL
    const child = spawn(process.execPath, ['dist/kernel/boot/main.js'], { cwd: repository, env, stdio: ['ignore', 'pipe', 'pipe'] })
    const { output, exited } = watchChild(t, child)
    // A start that serves regardless is ended, so the test fails rather than waits.
    setTimeout(() => child.kill('SIGKILL'), 30_000).unref()
    t.same(await exited, { code: 1, signal: null }, output.text)
    const said = output.text.split('\n').filter((line) => line.startsWith('keygate: ') && !line.includes('warning'))
    t.same(said, [
      'keygate: this database was migrated by a newer version of keygate (kernel migration 9999-from-a-later-release is unknown to this one): ' +
        'start that version again, or restore the backup taken before the upgrade',
    ], output.text)
    t.notMatch(output.text, /\n\s+at /, 'no stack')
    t.notMatch(output.text, /listening|First start/, 'neither served nor bootstrapped')
    t.notOk(existsSync(join(service.config.dataDir, 'admin-key-2.json')), 'no second root key file')

  }),
)
