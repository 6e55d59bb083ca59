/**
 * The node registry (D16): every process claims a unique node id (0-15, the node bits
 * of request ids, D8) from the database at start, as a row of `kernel_nodes` that it
 * keeps alive with a heartbeat. A row whose heartbeat is older than `expireMs` belongs
 * to a process that is gone: its id may be claimed again. The live rows are the
 * service's servers (`GET /Api/Read/Servers`).
 *
 * Liveness is wall-clock time (Date.now), not the kernel's clock: heartbeats run on
 * real timers, and processes on one database must agree on what "30 s ago" means.
 */
import { randomBytes } from 'node:crypto'
import { serverNameFor } from './serverName.ts'
import { networkInterfaces } from 'node:os'
import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { isUniqueViolation, retryOnDeadlock } from '../storage/database.ts'
import { nodeCount, type RequestIds } from '../callLog/requestId.ts'
// Found by walking up to package.json, so the build (dist/kernel/cluster) reports it too.
import { packageVersion } from '../boot/packageRoot.ts'

/** A live service process, as `kernel.servers.live()` lists it. Times are epoch milliseconds. */
export interface LiveServer {
  nodeId: number
  serverName: string
  serverAddr: string | null
  serverPort: number
  version: string
  started: number
  lastSeen: number
}

export interface NodeRegistryOptions {
  /** The configured node id: honoured as given (the operator vouches it is unique); null = claim one. */
  nodeId: number | null
  serverName: string
  /** The listen address; an any-address (0.0.0.0, ::) is replaced by this host's first external IPv4. */
  host: string
  heartbeatMs: number
  expireMs: number
  report: (error: unknown) => void
  now?: () => number
}

/** No node id is free: more live processes on this database than request ids can tell apart. */
export class NodeIdsExhaustedError extends Error {}

function serverAddress(host: string): string | null {
  if (host !== '0.0.0.0' && host !== '::' && host !== '') return host
  for (const addresses of Object.values(networkInterfaces())) {
    for (const address of addresses ?? []) if (address.family === 'IPv4' && !address.internal) return address.address
  }
  return null
}

export class NodeRegistry {
  private timer: NodeJS.Timeout | null = null
  private port: number | null = null
  private readonly token = randomBytes(16).toString('hex')
  private readonly now: () => number
  private readonly started: number
  private readonly address: string | null
  private readonly listeners: ((nodeId: number) => void)[] = []
  /** A heartbeat failure is reported once per outage, not every beat. */
  private failing = false
  private beating: Promise<void> | null = null
  private released = false
  /** A row of ours is in the table (a configured id writes it only when the process listens). */
  private holding = false

  private constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly options: NodeRegistryOptions,
    private current: number,
  ) {
    this.now = options.now ?? Date.now
    this.started = this.now()
    this.address = serverAddress(options.host)
  }

  /**
   * Claims a free node id and starts the heartbeat. A configured id is only taken (and
   * its row written) once the process listens: the operator CLI runs on the service's
   * configuration, and must not take a serving process's id.
   */
  static async start(db: Kysely<CoreTables>, options: NodeRegistryOptions): Promise<NodeRegistry> {
    if (options.nodeId !== null) return new NodeRegistry(db, options, options.nodeId)
    const registry = new NodeRegistry(db, options, -1)
    // MySQL may pick one of several processes starting at once as a deadlock victim.
    registry.current = await retryOnDeadlock(() => registry.claimFree())
    registry.holding = true
    registry.startBeating()
    return registry
  }

  private startBeating(): void {
    this.timer ??= setInterval(() => void this.heartbeat(), this.options.heartbeatMs)
    this.timer.unref()
  }

  /** This process's node id now (it changes only if another process took the old one over). */
  get nodeId(): number {
    return this.current
  }

  /** Called with the new id when this process had to claim another one. */
  onChange(listener: (nodeId: number) => void): void {
    this.listeners.push(listener)
  }

  private row(nodeId: number, now: number) {
    return {
      node_id: nodeId,
      instance_token: this.token,
      server_name: serverNameFor(this.options.serverName, nodeId),
      server_addr: this.address,
      server_port: this.port,
      version: packageVersion,
      started: this.started,
      last_seen: now,
    }
  }

  private async claim(): Promise<number> {
    return this.options.nodeId === null ? this.claimFree() : this.claimConfigured(this.options.nodeId)
  }

  /**
   * The lowest id that no row holds, or whose row expired. Each step is one atomic
   * statement that says whether it won: an insert fails on the primary key when another
   * process inserted first, and a takeover updates only a row still holding the token
   * and heartbeat read here, so of two processes racing for one id exactly one gets it.
   */
  private async claimFree(): Promise<number> {
    const now = this.now()
    const rows = await this.db.selectFrom('kernel_nodes').select(['node_id', 'instance_token', 'last_seen']).execute()
    const held = new Map(rows.map((row) => [Number(row.node_id), row]))
    for (let nodeId = 0; nodeId < nodeCount; nodeId++) {
      const holder = held.get(nodeId)
      if (holder === undefined) {
        try {
          await this.db.insertInto('kernel_nodes').values(this.row(nodeId, now)).execute()
          return nodeId
        } catch (error) {
          if (!isUniqueViolation(error)) throw error
          continue
        }
      }
      if (Number(holder.last_seen) >= now - this.options.expireMs) continue
      const taken = await this.db.updateTable('kernel_nodes').set(this.row(nodeId, now))
        .where('node_id', '=', nodeId)
        .where('instance_token', '=', holder.instance_token)
        .where('last_seen', '=', holder.last_seen)
        .executeTakeFirst()
      if (Number(taken.numUpdatedRows) === 1) return nodeId
    }
    throw new NodeIdsExhaustedError(
      `all ${nodeCount} node ids are held by live processes on this database (seen in the last ${this.options.expireMs / 1000} s); ` +
        `stop one, or wait until a stopped one expires`,
    )
  }

  /** A configured id is taken whatever holds it; a live holder means a misconfiguration, and is reported. */
  private async claimConfigured(nodeId: number): Promise<number> {
    const now = this.now()
    try {
      await this.db.insertInto('kernel_nodes').values(this.row(nodeId, now)).execute()
      return nodeId
    } catch (error) {
      if (!isUniqueViolation(error)) throw error
    }
    const holder = await this.db.selectFrom('kernel_nodes').select(['server_name', 'instance_token', 'last_seen']).where('node_id', '=', nodeId).executeTakeFirst()
    if (holder && holder.instance_token !== this.token && Number(holder.last_seen) >= now - this.options.expireMs) {
      this.options.report(new Error(`nodeId ${nodeId} is configured here but also held by a live process (${holder.server_name}); request ids may collide: give each process its own nodeId, or leave it unset`))
    }
    await this.db.updateTable('kernel_nodes').set(this.row(nodeId, now)).where('node_id', '=', nodeId).execute()
    return nodeId
  }

  /** The process now listens on `port`: from here on it is one of the service's servers. */
  async serving(port: number): Promise<void> {
    this.port = port
    this.startBeating()
    // A beat already under way was sent without the port: wait for it, then store the port,
    // so the process is listed by the time it says it listens.
    await this.beating
    await this.heartbeat()
  }

  /**
   * Marks this process alive. When its row was taken over (it could not reach the
   * database for longer than the expiry, and a new process claimed its id; or a process
   * configured with its id started), it claims
   * an id again and tells the listeners. A database that cannot be reached is reported
   * once and the heartbeat keeps trying; the process keeps serving meanwhile.
   */
  heartbeat(): Promise<void> {
    this.beating ??= this.beat().finally(() => {
      this.beating = null
    })
    return this.beating
  }

  private async beat(): Promise<void> {
    if (this.released) return
    try {
      const now = this.now()
      const kept = await this.db.updateTable('kernel_nodes').set({ last_seen: now, server_port: this.port })
        .where('node_id', '=', this.current)
        .where('instance_token', '=', this.token)
        .executeTakeFirst()
      if (Number(kept.numUpdatedRows) === 0) {
        const lost = this.current
        this.current = await this.claim()
        // Either cause is possible and this process cannot tell which: a process configured
        // with this nodeId takes it from a live holder too (claimConfigured).
        if (this.holding) this.options.report(new Error(`node id ${lost} was taken over by another process (this one could not renew it in time, or the other was started with that nodeId); now node id ${this.current}`))
        this.holding = true
        if (this.current !== lost) for (const listener of this.listeners) listener(this.current)
      }
      this.failing = false
    } catch (error) {
      if (!this.failing) this.options.report(error)
      this.failing = true
    }
  }

  /** The processes seen within the expiry that listen (the operator CLI holds an id but serves nothing). */
  async live(): Promise<LiveServer[]> {
    const rows = await this.db.selectFrom('kernel_nodes').selectAll()
      .where('last_seen', '>=', this.now() - this.options.expireMs)
      .where('server_port', 'is not', null)
      .orderBy('node_id')
      .execute()
    return rows.map((row) => ({
      nodeId: Number(row.node_id),
      serverName: row.server_name,
      serverAddr: row.server_addr,
      serverPort: Number(row.server_port),
      version: row.version,
      started: Number(row.started),
      lastSeen: Number(row.last_seen),
    }))
  }

  /** Stops the heartbeat and gives the id back at once (a clean stop need not wait for the expiry). */
  async release(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    await this.beating?.catch(() => undefined)
    if (this.released) return
    this.released = true
    await this.db.deleteFrom('kernel_nodes').where('node_id', '=', this.current).where('instance_token', '=', this.token).execute()
      .catch((error) => this.options.report(error))
  }
}

/** What must know this process's node id when it changes. */
export interface NodeFollower {
  useNode(nodeId: number): void
}

/**
 * Keeps a process's request ids on its node id: after a change they go on under the
 * new id, continuing after the highest id in the log (as at start, D8). `others` (the
 * call log's reads, which tell their own fresh records from a sibling's by it) follow too.
 */
export function followNodeId(nodes: NodeRegistry, requestIds: RequestIds, lastLoggedId: () => Promise<number>, report: (error: unknown) => void, others: readonly NodeFollower[] = []): void {
  nodes.onChange((nodeId) => {
    requestIds.useNode(nodeId)
    for (const other of others) other.useNode(nodeId)
    lastLoggedId().then((id) => requestIds.resumeAfter(id), report)
  })
}
