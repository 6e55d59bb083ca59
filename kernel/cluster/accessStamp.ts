import { randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { CoreTables } from '../storage/coreTables.ts'
import { Underway } from './underway.ts'
import { isUniqueViolation } from '../storage/database.ts'

/** How often a serving process reads the stamp: every 5 s, or every `cache.keyTtlSeconds` when that is shorter. */
export function accessStampEveryMs(keyTtlSeconds: number): number {
  return Math.min(5_000, keyTtlSeconds * 1000)
}

/** The setting every process on one database reads: a new value means keys, groups or ACL changed. */
const stampName = 'access_changed'

/**
 * Key, group and ACL changes made by another process, through the database: the changer
 * writes a new stamp (`kernel_settings.access_changed`) and every serving process reads
 * it every few seconds, forgetting its loaded keys and cached answers when it moved.
 * This is how an operator CLI change (another process, which cannot reach the service's
 * caches) reaches a service without Redis, including the answers the response cache
 * keeps for an hour (GET /Api/Read/Acl); with Redis, pub/sub does it at once.
 */
export class AccessStamp {
  /** The stamp as this process last wrote or read it: its own change is not news to it. */
  private seen: string | undefined = undefined
  private timer: NodeJS.Timeout | null = null
  private reading: Promise<void> | null = null
  /** Stamps still being written: a CLI run that made a change waits for them before it exits. */
  private readonly writing = new Underway()

  constructor(
    private readonly db: Kysely<CoreTables>,
    private readonly report: (error: unknown) => void,
  ) {}

  /** Marks a change: every other process that reads the stamp drops what it made stale. */
  mark(): void {
    this.writing.add(this.write().catch(this.report))
  }

  private async write(): Promise<void> {
    const value = randomBytes(9).toString('base64url')
    this.seen = value
    const updated = await this.db.updateTable('kernel_settings').set({ value }).where('name', '=', stampName).executeTakeFirst()
    if (Number(updated.numUpdatedRows) > 0) return
    try {
      await this.db.insertInto('kernel_settings').values({ name: stampName, value }).execute()
    } catch (error) {
      // Another process wrote the first stamp at the same moment: write ours over it.
      if (!isUniqueViolation(error)) throw error
      await this.db.updateTable('kernel_settings').set({ value }).where('name', '=', stampName).execute()
    }
  }

  /** Reads the stamp every `everyMs`; `changed` runs when another process moved it since the last read. */
  async watch(everyMs: number, changed: () => void): Promise<void> {
    this.seen = await this.read()
    this.timer = setInterval(() => {
      this.reading ??= this.read()
        .then((value) => {
          if (value !== this.seen) {
            this.seen = value
            changed()
          }
        })
        .catch(this.report)
        .finally(() => (this.reading = null))
    }, everyMs)
    this.timer.unref()
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
    await this.reading
    await this.writing.settled()
  }

  private async read(): Promise<string | undefined> {
    const row = await this.db.selectFrom('kernel_settings').select('value').where('name', '=', stampName).executeTakeFirst()
    return row?.value
  }
}
