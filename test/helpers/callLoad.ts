/** Steady signed load on a running service, for tests that stop it under load. */
import { signedHeaders, type SigningKey } from '../../kernel/auth/signature.ts'

export interface CallLoad {
  /** Request ids of the calls that got an answer, in the order they came. */
  readonly answeredIds: number[]
  /** Resolves once at least `count` calls were answered. */
  answered(count: number): Promise<void>
  /**
   * From now on a refused connection ends a client (the service is stopping); until
   * then each keeps calling, so calls are in flight while the service stops. Resolves
   * when every client has ended.
   */
  stop(): Promise<void>
}

/** `clients` loops each calling `GET /Api/Read/Acl`; once stopping, a call the server no longer accepts ends its loop. */
export function callLoad(base: string, key: SigningKey, options: { clients?: number; headers?: Record<string, string> } = {}): CallLoad {
  const answeredIds: number[] = []
  let stopping = false
  async function client(): Promise<void> {
    while (true) {
      try {
        const response = await fetch(base + '/Api/Read/Acl', { headers: { ...signedHeaders(key, 'GET', '/Api/Read/Acl'), ...options.headers } })
        await response.arrayBuffer()
        const id = response.headers.get('x-requestid')
        if (id !== null) answeredIds.push(Number(id))
      } catch {
        if (stopping) return // the server has stopped accepting; those calls were never answered
      }
    }
  }
  const clients = Array.from({ length: options.clients ?? 16 }, client)
  return {
    answeredIds,
    async answered(count) {
      while (answeredIds.length < count) await new Promise((done) => setTimeout(done, 10))
    },
    async stop() {
      stopping = true
      await Promise.all(clients)
    },
  }
}
