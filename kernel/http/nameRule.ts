/**
 * The one rule for names (a key's Display_Name, a group's, an ACL entry's, a display
 * player's), shared by the API (plugins/keys/keyInput.ts, through the sdk) and the
 * operator CLI (scripts/admin/), so both store exactly the same names and an SQLite
 * installation always moves to MariaDB (docs/keys.md, "The rules in short").
 */
import { stringProblem } from './textRule.ts'

/** The longest name, in code points (as the schemas' maxLength counts): the varchar(255) columns. */
export const nameMaxLength = 255

// The text rule (textRule.ts) allows tab and line breaks in free text; a one-line field has no place for them.
const oneLineControl = /[\t\n\r]/
// Nothing but spaces and invisible format characters (zero-width space, joiners, marks).
const invisibleOnly = /^[\s\p{Cf}\p{Z}]*$/u

/** Why `text` may not be a one-line field (the text rule, and no tab or line break), or null. Completes "<field> ...". */
export function oneLineProblem(text: string): string | null {
  return stringProblem(text) ?? (oneLineControl.test(text) ? 'must not contain control characters' : null)
}

/**
 * Why `name` may not be a name, or null; completes "<field> ...". Display_Name is
 * unique per Parent by exact comparison: MariaDB's PAD SPACE collations ignore trailing
 * spaces in that comparison and SQLite does not, so names that start or end with white
 * space are refused, one rule on both databases.
 */
export function nameProblem(name: string, maxLength = nameMaxLength): string | null {
  if (name === '') return 'must not be empty'
  if ([...name].length > maxLength) return `must be at most ${maxLength} characters long`
  const lineProblem = oneLineProblem(name)
  if (lineProblem !== null) return lineProblem
  if (name.trim() !== name) return 'must not start or end with white space'
  if (invisibleOnly.test(name)) return 'must contain a visible character'
  return null
}
