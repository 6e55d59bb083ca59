/**
 * A private MariaDB server for tests that need the database to fail: its own data
 * folder and port, started and stopped by the test, never the shared server.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { freePort } from './freePort.ts'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createConnection } from 'mysql2/promise'

export class PrivateMariadb {
  private process: ChildProcess | null = null

  private constructor(readonly folder: string, readonly port: number) {}

  static async create(): Promise<PrivateMariadb> {
    const folder = mkdtempSync(join(tmpdir(), 'keygate-mariadb-'))
    const installed = spawnSync('mariadb-install-db', ['--no-defaults', `--datadir=${join(folder, 'data')}`, '--user=root', '--auth-root-authentication-method=normal'], { encoding: 'utf8' })
    if (installed.status !== 0) throw new Error(`mariadb-install-db failed: ${installed.stderr}`)
    const server = new PrivateMariadb(folder, await freePort())
    await server.start()
    const connection = await createConnection({ host: '127.0.0.1', port: server.port, user: 'root' })
    await connection.query('create database keygate character set utf8mb4 collate utf8mb4_bin')
    await connection.end()
    return server
  }

  get url(): string {
    return `mysql://root@127.0.0.1:${this.port}/keygate`
  }

  async start(): Promise<void> {
    this.process = spawn('mariadbd', [
      '--no-defaults', `--datadir=${join(this.folder, 'data')}`, `--port=${this.port}`, '--bind-address=127.0.0.1',
      `--socket=${join(this.folder, 'sock')}`, '--user=root', '--skip-log-bin', '--innodb-buffer-pool-size=32M',
    ], { stdio: 'ignore' })
    for (let attempt = 0; attempt < 100; attempt++) {
      try {
        const connection = await createConnection({ host: '127.0.0.1', port: this.port, user: 'root', connectTimeout: 500 })
        await connection.end()
        return
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    throw new Error('the private MariaDB did not start')
  }

  /**
   * SIGSTOP: the server stops answering but its connections stay open, as a host that
   * vanished or a firewall that drops packets looks to the service.
   */
  pause(): void {
    this.process?.kill('SIGSTOP')
  }

  /**
   * Resolves once every thread of the paused server has stopped: SIGSTOP lands a moment
   * after it is sent, and a statement sent meanwhile (on a busy machine) could still be
   * carried out and answered.
   */
  async stopped(): Promise<void> {
    const pid = this.process?.pid
    if (pid === undefined) return
    const running = () => readdirSync(`/proc/${pid}/task`).some((task) => !/^\d+ \(.*\) [Tt] /s.test(readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8')))
    for (const since = Date.now(); running(); ) {
      if (Date.now() - since > 10_000) throw new Error('the private MariaDB did not stop')
      await new Promise((resolve) => setTimeout(resolve, 1))
    }
  }

  resume(): void {
    this.process?.kill('SIGCONT')
  }

  async stop(): Promise<void> {
    const running = this.process
    if (!running || running.exitCode !== null) return
    const exited = new Promise((resolve) => running.once('exit', resolve))
    running.kill('SIGKILL')
    await exited
    this.process = null
  }

  async destroy(): Promise<void> {
    await this.stop()
    rmSync(this.folder, { recursive: true, force: true })
  }
}
