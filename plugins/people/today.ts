import { sql, type CalendarDay } from '../../kernel/sdk.ts'
import { personRecord, recordColumns, type PersonRecord, type RecordRow } from './fields.ts'
import { inScope, type PeopleDb, type Scope } from './scope.ts'

/**
 * GET /People/Read/Today (D14): what a display screen shows today. Birthday carries an
 * invalid year (interface 2.4), so only its month and day count; HireDate gives work
 * anniversaries from the first full year. Someone born (or hired) on 29 February is
 * shown on 28 February in other years, so no one is skipped three years in four.
 */

export type Occasion = 'Birthday' | 'Anniversary'

export interface TodayEntry extends PersonRecord {
  Occasion: Occasion
  /** Full years since HireDate for an anniversary; null for a birthday. */
  Years: number | null
}

const pad = (value: number) => String(value).padStart(2, '0')

function isLeapYear(year: number): boolean {
  return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
}

/** The `MM-DD` of stored dates that fall on `day`: itself, and 29 February on a non-leap 28 February. */
export function monthDaysOn(day: CalendarDay): string[] {
  const own = `${pad(day.month)}-${pad(day.day)}`
  return day.month === 2 && day.day === 28 && !isLeapYear(day.year) ? [own, '02-29'] : [own]
}

/** The occasions a person's Skip names ("Birthday, Anniversary", any case and separator). */
function skipped(skip: string | null): Set<string> {
  return new Set((skip ?? '').toLowerCase().split(/[^a-z]+/).filter(Boolean))
}

/**
 * The scope's people with an occasion on `day`: not deleted, not terminated (a TermDate
 * today or earlier), optionally of one DispGroup; birthdays first, then by name.
 */
export async function peopleToday(db: PeopleDb, scope: Scope, day: CalendarDay, dispGroup: string | undefined): Promise<TodayEntry[]> {
  const monthDays = monthDaysOn(day)
  const today = `${day.year}-${pad(day.month)}-${pad(day.day)}`
  // `YYYY-MM-DD` text in both engines: characters 6-10 are the month and day.
  const monthDayOf = (column: 'birthday' | 'hire_date') => sql<string>`substr(${sql.ref(column)}, 6, 5)`
  const rows = await db.selectFrom('people').select(recordColumns)
    .where(inScope(scope))
    .where('deleted', '=', 0)
    .where((eb) => eb.or([eb('term_date', 'is', null), eb('term_date', '>', today)]))
    .$if(dispGroup !== undefined, (query) => query.where('disp_group', '=', dispGroup!))
    .where((eb) => eb.or([eb(monthDayOf('birthday'), 'in', monthDays), eb(monthDayOf('hire_date'), 'in', monthDays)]))
    .execute()

  const entries: TodayEntry[] = []
  for (const row of rows as RecordRow[]) {
    const skip = skipped(row.skip)
    const record = personRecord(row)
    if (row.birthday && monthDays.includes(row.birthday.slice(5)) && !skip.has('birthday')) {
      entries.push({ ...record, Occasion: 'Birthday', Years: null })
    }
    if (row.hire_date && monthDays.includes(row.hire_date.slice(5)) && !skip.has('anniversary')) {
      const years = day.year - Number(row.hire_date.slice(0, 4))
      if (years >= 1) entries.push({ ...record, Occasion: 'Anniversary', Years: years })
    }
  }
  const order: Record<Occasion, number> = { Birthday: 0, Anniversary: 1 }
  return entries.sort((a, b) =>
    order[a.Occasion] - order[b.Occasion] || a.LastName.localeCompare(b.LastName) || a.FirstName.localeCompare(b.FirstName) || a.Id - b.Id)
}
