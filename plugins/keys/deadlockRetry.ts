/**
 * MySQL may pick a transaction as a deadlock victim when several writes race on one
 * unique index entry (three creates of one name where the first rolls back). That is
 * not the client's fault nor an outage, so the transaction is simply run again; the
 * retry then meets the committed row and answers the usual 400.
 */
const attempts = 3

function isDeadlock(error: unknown): boolean {
  return (error as { code?: string })?.code === 'ER_LOCK_DEADLOCK'
}

export async function retryOnDeadlock<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work()
    } catch (error) {
      if (attempt >= attempts || !isDeadlock(error)) throw error
    }
  }
}
