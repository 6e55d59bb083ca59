import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { Underway } from './underway.ts'

/** How often a serving process reads the changes of other processes. */
export const partitionChangesEveryMs = 1_000
/** How long a change row is kept: far longer than any process takes between two reads. */
const keepMs = 10 * 60_000
/** How long an id that is missing between two ids already read is looked for (a commit that came later). */
const gapWaitMs = 10_000

/**
 * Cache-partition changes (a people write dropping a tenant's cached listings, D11) made
 * by another process on the same MySQL/MariaDB database when Redis does not carry them:
 * none is configured, or it could not reach every process. The changer inserts a row per
 * partition; every serving process reads the new rows every second and drops those
 * partitions from its own cache. Without this, several hosts on one database without
 * Redis served a listing cached before another host's write for up to its hour.
 * (Key, group and ACL changes travel through AccessStamp; cluster workers of one host
 * through their primary as well.)
 */
export class PartitionChanges {
  /** Every id at or below it has been read (or given up on). */
  private floor = 0
  /** Ids read above `floor`, and ids missing above it with when they were first missed. */
  private readonly read = new Set<number>()
  private readonly gaps = new Map<number, number>()
  private timer: NodeJS.Timeout | null = null
  private reading: Promise<void> | null = null
  private lastPurge = 0
  private failing = false
  private readonly writing = new Underway()

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly report: (error: unknown) => void,
  ) {}

  /** Tells the other processes that `partition` changed (this process already dropped it). */
  record(partition: string): void {
    this.writing.add(this.db.insertInto('kernel_partition_changes').values({ name: partition.slice(0, 255), changed: Date.now() })
      .executeTakeFirst()
      .then((inserted) => {
        // Our own change is not news to us.
        const id = Number(inserted.insertId)
        if (id > this.floor) this.read.add(id)
      })
      .catch(this.report))
  }

  /** Reads new changes every `everyMs` and hands each partition to `drop`. */
  async watch(everyMs: number, drop: (partition: string) => void): Promise<void> {
    const newest = await this.db.selectFrom('kernel_partition_changes').select((eb) => eb.fn.max('id').as('id')).executeTakeFirst()
    this.floor = Number(newest?.id ?? 0)
    this.timer = setInterval(() => {
      // A database away fails every read: said once, not every second until it is back.
      this.reading ??= this.poll(drop)
        .then(() => void (this.failing = false))
        .catch((error) => {
          if (!this.failing) this.report(error)
          this.failing = true
        })
        .finally(() => (this.reading = null))
    }, everyMs)
    this.timer.unref()
  }

  private async poll(drop: (partition: string) => void): Promise<void> {
    const rows = await this.db.selectFrom('kernel_partition_changes').select(['id', 'name'])
      .where('id', '>', this.floor).orderBy('id').limit(5_000).execute()
    const now = Date.now()
    const dropped = new Set<string>()
    let highest = this.floor
    for (const row of rows) {
      const id = Number(row.id)
      highest = Math.max(highest, id)
      this.gaps.delete(id)
      if (this.read.has(id)) continue
      this.read.add(id)
      if (!dropped.has(row.name)) {
        dropped.add(row.name)
        drop(row.name)
      }
    }
    // Ids below the highest one read that are not there yet: an insert that commits later
    // (MySQL hands out ids before commit), or one that failed. Looked for a while, then given up.
    // (A jump of thousands, as auto-increment makes after a server restart, is not waited for.)
    if (highest - this.floor > 10_000) this.gaps.clear()
    else for (let id = this.floor + 1; id < highest; id++) {
      if (!this.read.has(id) && !this.gaps.has(id)) this.gaps.set(id, now)
    }
    for (const [id, since] of this.gaps) if (now - since > gapWaitMs) this.gaps.delete(id)
    const nextFloor = this.gaps.size > 0 ? Math.min(...this.gaps.keys()) - 1 : highest
    for (const id of this.read) if (id <= nextFloor) this.read.delete(id)
    this.floor = nextFloor
    if (now - this.lastPurge > 60_000) {
      this.lastPurge = now
      await this.db.deleteFrom('kernel_partition_changes').where('changed', '<', now - keepMs).execute()
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    await this.reading
    await this.writing.settled()
  }
}
