/**
 * The service's own log lines, as the operator CLI prints them on stderr. The kernel it
 * starts logs pino JSON, which is for a log collector; a person at a terminal reads
 * `keygate: error: redis unreachable: ... (redis: redis://127.0.0.1:6379/0)`.
 * (Not `admin:`, the CLI's own lines, which scripts read.) pino has redacted the
 * entry before it gets here, and only the entry's own fields are printed.
 */

/** pino's fields of every line, said by the prefix or not at all. */
const everyLineFields = new Set(['level', 'time', 'service', 'pid', 'hostname', 'msg'])

const levelWords: Record<string, string> = { warn: 'warning: ', error: 'error: ', fatal: 'error: ' }

function fieldText(name: string, value: unknown): string {
  // pino's error serializer: its message says it (the stack is for the service's log).
  if (name === 'err' && typeof value === 'object' && value !== null && 'message' in value) return `${name}: ${String(value.message)}`
  return `${name}: ${typeof value === 'string' ? value : JSON.stringify(value)}`
}

/** One pino JSON line as a line for a person; a line that is not a JSON object is kept as it is. */
export function serviceLogLine(line: string): string {
  let entry: unknown = null
  try {
    entry = JSON.parse(line)
  } catch {
    // kept below
  }
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return line.endsWith('\n') ? line : `${line}\n`
  const fields = entry as Record<string, unknown>
  const context = Object.entries(fields).filter(([name]) => !everyLineFields.has(name)).map(([name, value]) => fieldText(name, value))
  const message = typeof fields.msg === 'string' ? fields.msg : ''
  const said = context.length === 0 ? message : `${message} (${context.join(', ')})`
  return `keygate: ${levelWords[String(fields.level)] ?? ''}${said}\n`
}

/** A pino destination writing each line through serviceLogLine. */
export function serviceLogLines(write: (text: string) => void): { write(line: string): void } {
  return { write: (line) => write(serviceLogLine(line)) }
}
