/** Throw-away databases for tests and benchmarks: MySQL/MariaDB ones on the server at TEST_MYSQL_URL, SQLite ones in a temporary folder. */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openDatabase, type Database } from '../../kernel/storage/database.ts'
import { createConnection } from 'mysql2/promise'
import type { Test } from 'tap'

export const mysqlServerUrl = process.env.TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306'

/** In CI (.ci/run sets these) a MariaDB that cannot be reached fails the run instead of skipping. */
export const mysqlRequired = process.env.CI === 'true' || process.env.REQUIRE_MYSQL === '1'

export function mysqlServerOptions() {
  const url = new URL(mysqlServerUrl)
  return { host: url.hostname, port: Number(url.port || 3306), user: decodeURIComponent(url.username), password: decodeURIComponent(url.password) }
}

/** null when the server answers, else why not. */
export async function mysqlProblem(): Promise<string | null> {
  try {
    const connection = await createConnection(mysqlServerOptions())
    await connection.end()
    return null
  } catch (error) {
    return (error as Error).message
  }
}

export interface ScratchDatabase {
  name: string
  /** mysql://... naming the new database: a DATABASE_URL. */
  url: string
  drop(): Promise<void>
}

/** A new empty database (utf8mb4, binary collation) named `<prefix>_<random>`. */
export async function createScratchDatabase(prefix = 'kg_test'): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`
  const connection = await createConnection(mysqlServerOptions())
  await connection.query(`create database \`${name}\` character set utf8mb4 collate utf8mb4_bin`)
  await connection.end()
  const url = new URL(mysqlServerUrl)
  url.pathname = `/${name}`
  return {
    name,
    url: url.toString(),
    async drop() {
      const dropping = await createConnection(mysqlServerOptions())
      await dropping.query(`drop database if exists \`${name}\``)
      await dropping.end()
    },
  }
}

/**
 * Runs `body` on a scratch database dropped at the test's end. As forEachDatabase: when
 * no server answers, a skipped `mysql` subtest outside CI, a failure in CI.
 */
export async function withScratchMariadb(t: Test, body: (url: string) => Promise<void>): Promise<void> {
  const problem = await mysqlProblem()
  if (problem && !mysqlRequired) {
    await t.test('mysql', { skip: `MariaDB at ${mysqlServerUrl} is not reachable (${problem}); CI requires it` }, async () => {})
    return
  }
  if (problem) {
    t.fail(`MariaDB at ${mysqlServerUrl} is required here (CI) but not reachable: ${problem}`)
    return
  }
  const scratch = await createScratchDatabase()
  t.teardown(() => scratch.drop())
  await body(scratch.url)
}

/** The kernel's SQLite database in a new temporary folder, closed and removed at the test's end. */
export function scratchSqlite(t: Test, prefix: string): Database {
  const dataDir = mkdtempSync(join(tmpdir(), `keygate-${prefix}-`))
  const database = openDatabase({ databaseUrl: null, dataDir })
  t.teardown(async () => {
    await database.close()
    rmSync(dataDir, { recursive: true, force: true })
  })
  return database
}
