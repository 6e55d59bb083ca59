/**
 * `admin master-key rotate` (issue 12, item 6): re-seals every stored secret (each API
 * secret, the day secret in kernel_settings, the stored answers of Idempotency-Key
 * writes, and plugins' sealed columns, such as webhook secrets) under a new master key,
 * in ONE transaction, so the database is sealed wholly under the old key or wholly
 * under the new one; the same transaction writes its audit record (`master-key.rotate`). Built-in plugins' columns are re-sealed whether or not the config
 * enables them; a folder or npm plugin must be loaded, and while one that recorded
 * sealed columns is not, the command refuses before it changes anything
 * (sealedColumnPlan.ts).
 *
 * Where the new key goes depends on where the key lives (kernel/auth/masterKey.ts):
 * - a key file (the generated `dataDir/master.key`, or `MASTER_KEY=/path/to/file`):
 *   before the transaction the file is replaced (atomically) by "new key, then old
 *   key", so whichever way the run ends every row opens; after the commit it is
 *   replaced by the new key alone. An interrupted run leaves both lines, which is safe;
 *   the next rotation or run of this command finishes it (with the same NEW_MASTER_KEY too).
 * - a value (`MASTER_KEY=<64 hex digits>`): the new key is printed once, as
 *   `MASTER_KEY=<hex>`, BEFORE the transaction (so it cannot be lost with a commit),
 *   and the operator sets it when the command reports success. If the command fails,
 *   nothing changed and the old value stays in force, except when it ends (killed, or the
 *   connection lost) after sending COMMIT: the database may then be sealed under the
 *   printed value, and the old one no longer opens it (MasterKeyMismatch says to set it).
 * `NEW_MASTER_KEY=<64 hex digits>` gives the new key instead of a random one.
 *
 * Run it with the service stopped (or restart every process right after): a running
 * process keeps the key it started with.
 */
import { randomBytes } from 'node:crypto'
import type { Kernel } from '../../kernel/boot/kernel.ts'
import { SecretBox } from '../../kernel/auth/secrets.ts'
import { masterKeySource, readMasterKeyFile, writeMasterKeyFile } from '../../kernel/auth/masterKey.ts'
import { idempotencyContext } from '../../kernel/http/idempotencyStore.ts'
import { sealedColumnPlan } from './sealedColumnPlan.ts'
import { recordChange } from '../../kernel/audit/auditTrail.ts'
import type { Kysely } from 'kysely'
import { UsageError } from './command.ts'

/** Sealed kernel settings and the context each is sealed with (kernel/boot/bootstrap.ts). */
const sealedSettings = [{ name: 'day_secret', context: 'day-secret' }]

export interface RotationOptions {
  /** The new key; random when absent. */
  newKey?: Buffer
  /** Where the one-time announcement of a new MASTER_KEY value goes. */
  announce: (line: string) => void
  /** Tests: fail after re-sealing this many API secrets, inside the transaction. */
  failAfterSecrets?: number
  /** Tests: fail after the commit, before the key file holds the new key alone. */
  failAfterCommit?: boolean
}

export interface RotationResult {
  Secrets: number
  Settings: number
  /** Other sealed values: stored Idempotency-Key answers and plugins' sealed columns. */
  Sealed: number
  Key: string
}

function sameKeys(keys: Buffer[]): Buffer[] {
  return keys.filter((key, index) => keys.findIndex((other) => other.equals(key)) === index)
}

export async function rotateMasterKey(kernel: Kernel, options: RotationOptions): Promise<RotationResult> {
  const { db, dialect } = kernel.database
  const { config } = kernel
  const source = masterKeySource(config.masterKey, config.dataDir)
  const newKey = options.newKey ?? randomBytes(32)
  const sealer = new SecretBox(newKey)
  // kernel.secrets opens with every key in force (a file left by an interrupted run has two).
  const opener = kernel.secrets
  // First, before the key file or the printed value changes: a refusal leaves all as it was.
  const sealedColumns = await sealedColumnPlan(kernel)

  let oldFileKeys: Buffer[] = []
  if (source.kind === 'file') {
    oldFileKeys = readMasterKeyFile(source.file)
    // The first line of a two-line file is the new key of an interrupted run: rotating to it
    // again (the same NEW_MASTER_KEY) finishes that run; any other key in the file is in use.
    const finishing = oldFileKeys.length > 1 && oldFileKeys[0].equals(newKey)
    if (!finishing && oldFileKeys.some((key) => key.equals(newKey))) throw new Error('the new master key is already in use')
    writeMasterKeyFile(source.file, sameKeys([newKey, ...oldFileKeys]))
  } else {
    if (source.key.equals(newKey)) throw new Error('the new master key is the one in use')
    options.announce(`MASTER_KEY=${newKey.toString('hex')}`)
  }

  let result: RotationResult
  try {
    result = await db.transaction().execute(async (trx) => {
      let query = trx.selectFrom('api_keys').select(['id', 'api_key', 'secret_enc', 'prev_secret_enc']).orderBy('id')
      // MariaDB: a concurrent edit of a key waits for this transaction; SQLite's write lock does the same.
      if (dialect === 'mysql') query = query.forUpdate()
      const rows = await query.execute()
      let secrets = 0
      for (const row of rows) {
        const resealed = sealer.seal(opener.open(row.secret_enc, row.api_key), row.api_key)
        // The secret before a rotation (issue 16) is sealed the same way and must open after the switch too.
        const previous = row.prev_secret_enc === null ? null : sealer.seal(opener.open(row.prev_secret_enc, row.api_key), row.api_key)
        await trx.updateTable('api_keys').set({ secret_enc: resealed, prev_secret_enc: previous }).where('id', '=', row.id).execute()
        secrets++
        if (secrets === options.failAfterSecrets) throw new Error(`simulated failure after ${secrets} secrets`)
      }
      let settings = 0
      for (const setting of sealedSettings) {
        const stored = await trx.selectFrom('kernel_settings').select('value').where('name', '=', setting.name).executeTakeFirst()
        if (!stored) continue
        const resealed = sealer.seal(opener.open(stored.value, setting.context), setting.context)
        await trx.updateTable('kernel_settings').set({ value: resealed }).where('name', '=', setting.name).execute()
        settings++
      }
      let sealed = 0
      // Stored answers sealed since 0.3.3 (older ones are plain base64 and expire within 24 hours).
      const answers = await trx.selectFrom('api_idempotency').select(['key_id', 'idem_key', 'body']).where('body', 'like', 'v1:%').execute()
      for (const row of answers) {
        const context = idempotencyContext(Number(row.key_id), row.idem_key)
        await trx.updateTable('api_idempotency').set({ body: sealer.seal(opener.open(row.body!, context), context) })
          .where('key_id', '=', row.key_id).where('idem_key', '=', row.idem_key).execute()
        sealed++
      }
      const plugins = trx as unknown as Kysely<Record<string, Record<string, unknown>>>
      for (const column of sealedColumns) {
        const rows = await plugins.selectFrom(column.table).select([`${column.idColumn} as id`, `${column.column} as value`]).where(column.column, 'is not', null).execute()
        for (const row of rows) {
          const context = `${column.contextPrefix}${row.id}`
          await plugins.updateTable(column.table).set({ [column.column]: sealer.seal(opener.open(String(row.value), context), context) }).where(column.idColumn, '=', row.id).execute()
          sealed++
        }
      }
      // The operator's change belongs to the whole installation: audited under tenant 0/0
      // (issue 16), with what was re-sealed and never a key or a secret.
      await recordChange(trx, Date.now(), { who: null, parent: 0, custno: 0, action: 'master-key.rotate', after: { Secrets: secrets, Settings: settings, Sealed: sealed } })
      return { Secrets: secrets, Settings: settings, Sealed: sealed, Key: source.kind === 'file' ? source.file : 'MASTER_KEY' }
    })
  } catch (error) {
    // Nothing was committed: the key file goes back to what it was (the old key seals again).
    if (source.kind === 'file') writeMasterKeyFile(source.file, oldFileKeys)
    throw error
  }
  if (options.failAfterCommit) throw new Error('simulated failure after the commit')
  if (source.kind === 'file') writeMasterKeyFile(source.file, [newKey])
  return result
}

/**
 * The CLI command `master-key rotate`, shaped as one command family of the admin
 * dispatcher: `words` are the words after `master-key`. Prints where the new key is
 * and what to do next.
 */
export const masterKey = {
  usage: '  master-key rotate                                 re-seal every stored secret under a new master key (NEW_MASTER_KEY=hex to choose it)',
  async run(session: { kernel(): Promise<Kernel> }, words: string[]): Promise<unknown> {
    if (words[0] !== 'rotate' || words.length !== 1) throw new UsageError('usage: master-key rotate')
    const given = process.env.NEW_MASTER_KEY || undefined
    if (given !== undefined && !/^[0-9a-f]{64}$/i.test(given)) throw new Error('NEW_MASTER_KEY must be 64 hex digits')
    const kernel = await session.kernel()
    // A running service keeps the old key in memory and would go on sealing with it: a key
    // created before its restart could never be opened again (SECURITY.md, "Master key").
    const running = await kernel.services.servers.live()
    if (running.length > 0) {
      const named = running.map((server) => `${server.serverName} (node ${server.nodeId}, port ${server.serverPort})`).join(', ')
      throw new Error(`master-key rotate refused, nothing was changed: the service is running on this database: ${named}, seen in the last ${kernel.config.nodes.expireMs / 1000} s. Stop every process first; it would go on sealing new secrets with the old key, and those would never open again`)
    }
    const result = await rotateMasterKey(kernel, {
      newKey: given === undefined ? undefined : Buffer.from(given, 'hex'),
      announce: (line) => console.log(line),
    })
    const next = result.Key === 'MASTER_KEY' ? 'set MASTER_KEY to the value printed above, then restart every process' : `the new key is in ${result.Key}; restart every process`
    return { ...result, Next: next }
  },
}
