/**
 * What text the service stores, decided once for every plugin (issue 12, item 1):
 * no C0 control character other than tab, line feed and carriage return, no DEL, and
 * no lone UTF-16 surrogate. Such text cannot be carried by XML 1.0 (an answer would
 * fail), and lone surrogates cannot be stored as utf8mb4 (MariaDB would fail the write
 * where SQLite accepts it), so it is refused at input with a 400 naming the field.
 */

// U+0000-U+0008, U+000B, U+000C, U+000E-U+001F and U+007F.
const controlCharacter = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

export interface TextProblem {
  /** Where in the value: property names and array indexes, outermost first. */
  path: (string | number)[]
  /** Completes "<field> ...", e.g. "must not contain control characters". */
  message: string
}

/** Why `text` may not be stored, or null when it may. */
export function stringProblem(text: string): string | null {
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
 * The first string or field name anywhere in `value` (a parsed JSON body or a query)
 * that breaks the rule, or null. Iterative, so a deeply nested body cannot overflow the
 * stack here; the path is only built for the one problem found.
 */
export function textProblem(value: unknown): TextProblem | null {
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
