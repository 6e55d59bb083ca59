/**
 * What text the service stores, decided once for every plugin (issue 12, item 1):
 * no C0 control character other than tab, line feed and carriage return, no DEL, no C1
 * control character (U+0080-U+009F: text decoded with the wrong code page, never meant),
 * and no lone UTF-16 surrogate. Such text cannot be carried by XML 1.0 (an answer would
 * fail), and lone surrogates cannot be stored as utf8mb4 (MariaDB would fail the write
 * where SQLite accepts it), so it is refused at input with a 400 naming the field.
 */

// U+0000-U+0008, U+000B, U+000C, U+000E-U+001F and U+007F-U+009F.
const controlCharacter = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
// Any character of those two, and any surrogate (paired ones are fine): text without
// one, nearly all text, is decided by this one plain test.
const suspect = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\uD800-\uDFFF]/

export interface TextProblem {
  /** Where in the value: property names and array indexes, outermost first. */
  path: (string | number)[]
  /** Completes "<field> ...", e.g. "must not contain control characters". */
  message: string
}

/** Why `text` may not be stored, or null when it may. */
export function stringProblem(text: string): string | null {
  if (!suspect.test(text)) return null
  if (loneSurrogate.test(text)) return 'is not valid Unicode text'
  if (controlCharacter.test(text)) return 'must not contain control characters'
  return null
}

interface Pending {
  value: unknown
  parent: Pending | null
  at: string | number
}

function pathOf(node: Pending): (string | number)[] {
  const path: (string | number)[] = []
  for (let current: Pending | null = node; current?.parent; current = current.parent) path.unshift(current.at)
  return path
}

/**
 * Whether every string and field name in `value` keeps the rule. Allocates nothing per
 * value, unlike the walk that names the problem (an import's 10,000 rows are 200,000
 * strings and names; this takes half the time of that walk, and most of its garbage).
 */
function keepsRule(value: unknown): boolean {
  const pending: unknown[] = [value]
  while (pending.length > 0) {
    const current = pending.pop()
    if (typeof current === 'string') {
      if (stringProblem(current) !== null) return false
    } else if (Array.isArray(current)) {
      for (let index = 0; index < current.length; index++) pending.push(current[index])
    } else if (current !== null && typeof current === 'object') {
      for (const name of Object.keys(current)) {
        if (stringProblem(name) !== null) return false
        pending.push((current as Record<string, unknown>)[name])
      }
    }
  }
  return true
}

/**
 * The first string or field name anywhere in `value` (a parsed JSON body or a query)
 * that breaks the rule, or null. Iterative, so a deeply nested body cannot overflow the
 * stack here; the path is only built for the one problem found, in a second walk that
 * only a refused value takes.
 */
export function textProblem(value: unknown): TextProblem | null {
  if (keepsRule(value)) return null
  const pending: Pending[] = [{ value, parent: null, at: '' }]
  while (pending.length > 0) {
    const node = pending.pop()!
    const current = node.value
    if (typeof current === 'string') {
      const message = stringProblem(current)
      if (message) return { path: pathOf(node), message }
    } else if (Array.isArray(current)) {
      for (let index = current.length - 1; index >= 0; index--) pending.push({ value: current[index], parent: node, at: index })
    } else if (current !== null && typeof current === 'object') {
      const names = Object.keys(current)
      for (let index = names.length - 1; index >= 0; index--) {
        const name = names[index]
        const message = stringProblem(name)
        // The field's own name is bad: point at the object holding it, not echo the name.
        if (message) return { path: pathOf(node), message: message.startsWith('is ') ? 'has a field name that is not valid Unicode text' : 'has a field name with control characters' }
        pending.push({ value: (current as Record<string, unknown>)[name], parent: node, at: name })
      }
    }
  }
  return null
}
