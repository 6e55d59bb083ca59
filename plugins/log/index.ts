import { badRequest, defineRoute, notFound, pagedListHeaders, parseInputDate, parseInputDateUntil, type CallerKey, type KernelServices, type Plugin } from '../../kernel/sdk.ts'
import { levelsGroup, levelsRoute } from './levels.ts'
import { fullLimitsAnswer, noCredits, windowRows, type FullLimits } from './limits.ts'
import { usageGroup, usageRoute } from './usage.ts'
import { historyAnswerSchema, limitsAnswerSchema, logAnswerSchema } from './schemas.ts'

export { timeLeftText } from './limits.ts'

/**
 * The call-log plugin (interface 2.3, 4.4, 4.6; D7, D8): a key reads the log record of
 * one of its own calls, the list of its recent calls, and the state of its rate limits.
 * The records themselves are written by the kernel's log stage for every call.
 */

// One text for "no such record" and "another key's record": nobody learns which (D6).
const noSuchRecord = 'Error: No log record with that LogRequestId for this key.'

/** x-RequestID values are copied from a header, so the id is taken as a number or a string of digits. */
const logRequestSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['LogRequestId'],
  properties: {
    LogRequestId: {
      anyOf: [
        { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
        { type: 'string', pattern: '^[0-9]{1,16}$' },
      ],
    },
  },
}

const historyDefaults = { page: 1, size: 100 }
const historySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    page: { type: 'integer', minimum: 1, maximum: 1_000_000 },
    size: { type: 'integer', minimum: 1, maximum: 1000 },
    From: { type: 'string', maxLength: 64 },
    To: { type: 'string', maxLength: 64 },
    Function: { type: 'string', minLength: 1, maxLength: 255 },
    // The spellings of page and size, and of the audit read's from and to, are taken too.
    from: { type: 'string', maxLength: 64 },
    to: { type: 'string', maxLength: 64 },
    function: { type: 'string', minLength: 1, maxLength: 255 },
  },
}

interface LogRequest { LogRequestId: number | string }

/**
 * The id a LogRequestId names. Its digits are judged as the number they spell, with the
 * number's own 400s: "0" is no id, and past 2^53 - 1 Number() would round to another one.
 */
function logRequestId(given: number | string): number {
  if (typeof given === 'number') return given
  const id = BigInt(given)
  if (id < 1n) throw badRequest('LogRequestId must be >= 1.')
  if (id > BigInt(Number.MAX_SAFE_INTEGER)) throw badRequest(`LogRequestId must be <= ${Number.MAX_SAFE_INTEGER}.`)
  return Number(id)
}
interface HistoryRequest { page?: number; size?: number; From?: string; To?: string; Function?: string; from?: string; to?: string; function?: string }

/** A filter given in either spelling (From or from), never both; with the name it was given by, for errors. */
function filterOf(body: HistoryRequest, name: 'From' | 'To' | 'Function'): { value: string; given: string } | undefined {
  const lower = name.toLowerCase() as 'from' | 'to' | 'function'
  if (body[name] !== undefined && body[lower] !== undefined) throw badRequest(`Give ${name} or ${lower}, not both.`)
  if (body[name] !== undefined) return { value: body[name]!, given: name }
  return body[lower] === undefined ? undefined : { value: body[lower]!, given: lower }
}

/**
 * Repeated reads of one record come from the response cache. A record never changes
 * after its call answered, except that retention clears its details; a short life
 * bounds how long a purged detail can still be read from the cache.
 */
const logReadTtlSeconds = 60

function inputTime(filter: { value: string; given: string } | undefined, parse: (text: string) => number | null = parseInputDate): number | undefined {
  if (filter === undefined) return undefined
  const time = parse(filter.value)
  if (time === null) throw badRequest(`${filter.given} must be an HTTP-date (Sun, 22 Nov 2026 08:49:37 GMT) or RFC 3339 (2026-11-22T08:49:37Z).`)
  return time
}

/**
 * The Function filter without surrounding white space (an endpoint path has none): MariaDB's
 * comparison ignores trailing spaces and SQLite's does not, so both answer alike only so.
 */
function functionFilter(filter: { value: string; given: string } | undefined): string | undefined {
  if (filter === undefined) return undefined
  const path = filter.value.trim()
  if (path === '') throw badRequest(`${filter.given} must not be empty.`)
  return path
}

async function readLog(kernel: KernelServices, caller: CallerKey, body: LogRequest) {
  const id = logRequestId(body.LogRequestId)
  const record = caller.anonymous ? undefined : await kernel.callLog.find(id, caller.id)
  if (!record) throw notFound(noSuchRecord)
  // The declared record of interface 2.3 in its declared order, then the two extras of D8.
  return {
    RequestTime: record.RequestTime,
    Http_Host: record.Http_Host,
    Server_Name: record.Server_Name,
    Server_Addr: record.Server_Addr,
    Server_Port: record.Server_Port,
    Remote_Addr: record.Remote_Addr,
    Request_Scheme: record.Request_Scheme,
    Request_Method: record.Request_Method,
    Api_Acl: record.Api_Acl,
    Api_Function: record.Api_Function,
    Request_Url: record.Request_Url,
    Http_User_Agent: record.Http_User_Agent,
    Raw_Request: record.Raw_Request,
    Response_Code: record.Response_Code,
    Rsponse: record.Rsponse,
    Bandwidth: record.Bandwidth,
    Response_Format: record.Response_Format,
    Seconds: record.Seconds,
    Secret: record.Secret,
  }
}

interface HistoryAnswer { Total: number; Page: string; Calls: Record<string, unknown>[] }

async function readHistory(kernel: KernelServices, caller: CallerKey, body: HistoryRequest): Promise<HistoryAnswer> {
  const page = body.page ?? historyDefaults.page
  const size = body.size ?? historyDefaults.size
  const from = inputTime(filterOf(body, 'From'))
  // Inclusive to the end of its second: a record's RequestTime is shown in whole seconds,
  // so To = that RequestTime must find the call made later within the same second (a date alone: its whole day).
  const to = inputTime(filterOf(body, 'To'), parseInputDateUntil)
  const apiFunction = functionFilter(filterOf(body, 'Function'))
  if (from !== undefined && to !== undefined && from > to) throw badRequest('From must not be later than To.')
  const { total, records } = caller.anonymous
    ? { total: 0, records: [] }
    : await kernel.callLog.history(caller.id, { page, size, from, to, apiFunction })
  const pages = Math.max(1, Math.ceil(total / size))
  return { Total: total, Page: `${page} of ${pages}`, Calls: records }
}

const logPlugin: Plugin = {
  name: 'log',
  defaultGroups: [
    {
      name: 'Call log reader',
      paths: [
        { path: '/Api/Read/Log', displayName: 'Read the log record of one of your calls' },
        { path: '/Api/Read/History', displayName: 'List your recent calls' },
        { path: '/Api/Read/Limits', displayName: 'Read the state of your rate limits' },
      ],
    },
    levelsGroup,
    usageGroup,
  ],
  setup(kernel) {
    return [
      defineRoute<LogRequest>({
        method: 'POST',
        path: '/Api/Read/Log',
        body: logRequestSchema,
        cache: { ttlSeconds: logReadTtlSeconds, partition: (call) => kernel.cache.keyPartition(call.caller.id) },
        answer: logAnswerSchema,
        xml: { root: 'Log' },
        handler: (call) => readLog(kernel, call.caller, call.body),
      }),
      defineRoute<HistoryRequest>({
        method: 'POST',
        path: '/Api/Read/History',
        body: historySchema,
        answer: historyAnswerSchema,
        xml: { root: 'History', item: 'Call', list: 'Calls' },
        csvColumns: ['Id', 'RequestTime', 'Request_Method', 'Api_Function', 'Api_Acl', 'Response_Code', 'Seconds', 'Bandwidth'],
        // CSV is one row per call; the totals go to headers as for other paged lists (D12).
        answerHeaders: pagedListHeaders({ csvOnly: true }),
        csv: (result: HistoryAnswer, call) => {
          call.setHeader('X-Total-Count', String(result.Total))
          call.setHeader('X-Page', result.Page)
          return result.Calls
        },
        handler: (call) => readHistory(kernel, call.caller, call.body),
      }),
      defineRoute({
        method: 'GET',
        path: '/Api/Read/Limits',
        answer: limitsAnswerSchema,
        // A window's label (`10/1Sec`) is no XML element name: in XML and CSV each window
        // is an item with its label in Window.
        xml: { root: 'Limits', item: 'Window' },
        xmlValue: (result: FullLimits) => windowRows(result),
        csv: (result: FullLimits) => windowRows(result),
        // A key without MaxHits or Credits has no window: its CSV is the header alone.
        csvColumns: ['Window', 'Limit', 'Remain', 'ResetDate', 'TimeLeft'],
        // Not cached: it is the live state. The call itself has been counted by the
        // rate-limit and credits stages already, so Remain includes it.
        handler: async (call) => {
          const { caller } = call
          const windows = await kernel.rateLimits.status(caller)
          const tenants = await kernel.rateLimits.tenantStatus(caller)
          // Credits are read only for a key that has them (the stage spent one already).
          const credits = caller.metered ? await kernel.credits.status(caller.id) : noCredits
          return fullLimitsAnswer(caller, windows, tenants, credits, kernel.clock())
        },
      }),
      levelsRoute(),
      usageRoute(kernel),
    ]
  },
}

export default logPlugin
