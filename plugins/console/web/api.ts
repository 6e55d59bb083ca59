import { signedHeaders, type Credentials } from './signing.ts'
import { storedDayCode, storeDayCode } from './session.ts'

/** An answer other than 2xx: its text is the API's own `Error: ...` line, shown as it is. */
export class ApiError extends Error {
  constructor(readonly status: number, message: string) {
    super(message)
  }
}

/** One operation the key may call (GET /Api/Read/List, D14). */
export interface Operation {
  Method: 'GET' | 'POST'
  Path: string
  Display_Name: string | null
  Plugin: string
  Needs: string
  Cached: number
}

/** Asks the person for the day code (x-apitoday); null when they cancel. */
export type DayCodeAsker = (reason: string) => Promise<string | null>

const dayCodeNeeded = /day code/i

/**
 * The console's only way to the service: signed calls of the public API under the base
 * path, exactly what `npm run call` does. A route that needs the day code (its entry of
 * /Api/Read/List says `today`), or a 401 that asks for it, gets it from the person once;
 * it is kept for the tab until the server refuses it.
 */
export class Api {
  private operations: Operation[] = []
  /** The server's clock minus the browser's, from the `Date` header of the latest answer (serverNow). */
  private clockOffset = 0

  constructor(
    readonly basePath: string,
    private readonly credentials: Credentials,
    private readonly askDayCode: DayCodeAsker,
  ) {}

  get apiKey(): string {
    return this.credentials.apiKey
  }

  /** Reads what this key may call; the first call after sign-in, which proves the secret. */
  async loadOperations(): Promise<Operation[]> {
    this.operations = await this.call<Operation[]>('GET', '/Api/Read/List')
    return this.operations
  }

  /** True when the key may call `METHOD path` (case-insensitive, D1). */
  may(method: string, path: string): boolean {
    const wanted = `${method} ${path}`.toLowerCase()
    return this.operations.some((operation) => `${operation.Method} ${operation.Path}`.toLowerCase() === wanted)
  }

  /**
   * Now by the server's clock, in milliseconds: what the console writes as "now" (Disable's
   * EndDate) and compares dates of the API with, so a browser clock that is off does not
   * leave a disabled key working. The header is whole seconds, read when the answer has
   * arrived: this errs early by up to a second and the answer's travel, never late.
   */
  serverNow(): number {
    return Date.now() + this.clockOffset
  }

  private needsDayCode(method: string, path: string): boolean {
    const wanted = `${method} ${path.split('?')[0]}`.toLowerCase()
    return this.operations.some((operation) => `${operation.Method} ${operation.Path}`.toLowerCase() === wanted && operation.Needs.includes('today'))
  }

  async call<T = unknown>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const text = body === undefined ? '' : JSON.stringify(body)
    let today = storedDayCode()
    if (!today && this.needsDayCode(method, path)) today = await this.dayCode('This operation needs the day code.')
    for (let attempt = 0; ; attempt++) {
      const response = await this.send(method, path, text, today ?? undefined)
      if (response.ok) {
        const type = response.headers.get('content-type') ?? ''
        return (type.includes('json') ? await response.json() : await response.text()) as T
      }
      const message = (await response.text()).trim() || `Error: HTTP ${response.status}`
      if (response.status === 401 && dayCodeNeeded.test(message) && attempt < 2) {
        storeDayCode(null)
        today = await this.dayCode(message)
        continue
      }
      throw new ApiError(response.status, message)
    }
  }

  private async dayCode(reason: string): Promise<string> {
    const code = await this.askDayCode(reason)
    if (!code) throw new ApiError(401, 'Error: This call needs the day code (x-apitoday).')
    storeDayCode(code)
    return code
  }

  private async send(method: string, path: string, body: string, today?: string): Promise<Response> {
    const headers = await signedHeaders(this.credentials, method, path, body, today)
    if (body !== '') headers['content-type'] = 'application/json'
    headers.accept = 'application/json'
    const response = await reach(this.basePath + path, { method, headers, body: body === '' ? undefined : body, credentials: 'omit', cache: 'no-store' })
    const serverDate = Date.parse(response.headers.get('date') ?? '')
    if (!Number.isNaN(serverDate)) this.clockOffset = serverDate - Date.now()
    return response
  }
}

/** fetch, with the browser's own text for a service that did not answer ("Failed to fetch", a TypeError) replaced by one that says so. */
async function reach(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init)
  } catch (error) {
    if (error instanceof TypeError) throw new ApiError(0, 'Error: The service did not answer (is it running, and is the network up?).')
    throw error
  }
}

/** The service's base path (config basePath), from the settings file served beside the app. */
export async function loadBasePath(): Promise<string> {
  const response = await reach(`${import.meta.env.BASE_URL}settings.json`, { cache: 'no-store' })
  if (!response.ok) throw new Error('Error: The console settings could not be read.')
  const settings = (await response.json()) as { basePath: string }
  return settings.basePath
}
