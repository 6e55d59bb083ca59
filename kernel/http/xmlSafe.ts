/**
 * Makes any answer value encodable as XML 1.0, so that no stored text (an older row
 * may hold what input now refuses) can make an XML answer fail (issue 12, item 1):
 * - characters XML 1.0 cannot carry (C0 controls other than tab/LF/CR, U+FFFE, U+FFFF,
 *   lone surrogates) become U+FFFD, the replacement character;
 * - a field name that is not a valid element name becomes one: each character that
 *   may not appear is replaced by `_`, and `_` is put in front when the first one may
 *   not start a name (`10/1Sec` -> `_10_1Sec`). This also keeps js2xmlparser's own
 *   prefixes (`@` attribute, `#` text, `=` alias) from being triggered by data.
 * JSON and CSV answers carry the value unchanged.
 */

const notXmlCharacter = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g
const plainName = /^[A-Za-z_][A-Za-z0-9_.-]*$/
// XML 1.0 (5th edition) NameStartChar and NameChar, without ':' (namespaces).
const nameStart = '_A-Za-z\\u00C0-\\u00D6\\u00D8-\\u00F6\\u00F8-\\u02FF\\u0370-\\u037D\\u037F-\\u1FFF\\u200C\\u200D\\u2070-\\u218F\\u2C00-\\u2FEF\\u3001-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFFD\\u{10000}-\\u{EFFFF}'
const nameStartCharacter = new RegExp(`^[${nameStart}]`, 'u')
const notNameCharacter = new RegExp(`[^${nameStart}\\-.0-9\\u00B7\\u0300-\\u036F\\u203F\\u2040]`, 'gu')

/** `text` with every character XML 1.0 cannot carry replaced by U+FFFD. */
export function xmlText(text: string): string {
  notXmlCharacter.lastIndex = 0
  return notXmlCharacter.test(text) ? text.replace(notXmlCharacter, '\uFFFD') : text
}

/** A valid XML element name for a field name. */
export function xmlName(name: string): string {
  if (plainName.test(name)) return name
  const replaced = name.replace(notNameCharacter, '_')
  return nameStartCharacter.test(replaced) ? replaced : `_${replaced}`
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const prototype = Object.getPrototypeOf(value)
  return prototype === Object.prototype || prototype === null
}

/** A copy of `value` that js2xmlparser encodes without throwing; other values (numbers, dates) as they are. */
export function xmlSafe(value: unknown): unknown {
  if (typeof value === 'string') return xmlText(value)
  if (value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) return value.map(xmlSafe)
  if (!isPlainObject(value)) return value
  const copy: Record<string, unknown> = {}
  for (const [name, item] of Object.entries(value)) {
    const safeName = xmlName(name)
    // Two names that become the same element: the later one is kept under a numbered name.
    let unique = safeName
    for (let suffix = 2; unique in copy; suffix++) unique = `${safeName}_${suffix}`
    copy[unique] = xmlSafe(item)
  }
  return copy
}
