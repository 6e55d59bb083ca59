import { httpDate, recordListSchema, recordSchema, type CallerKey, type GroupRecord, type KeyRecord, type TenantLicense } from '../../kernel/sdk.ts'

/** POST /account/read/user: the calling key as its owner sees it, never its secret (D14). */
export interface UserAnswer {
  Id: number
  Api_Key: string
  Name: string
  Email: string | null
  Phone: string | null
  Parent: number
  Custno: number
  StartDate: string | null
  EndDate: string | null
  DayPass: number
  Require_Https: number
  AllowHours: number | null
  ResponseFormat: string
  LogLevel: number
  LogRaw: number
  MaxHits: string
  /** Comma-separated group ids, as create and edit take them (interface 2.1). */
  GroupId: string
  Created: string
  Created_By: number | null
}

const nullableNumber = (value: number | null) => (value === null ? null : Number(value))
const nullableDate = (value: number | null) => (value === null ? null : httpDate(Number(value)))

export function userAnswer(row: KeyRecord, groups: readonly GroupRecord[]): UserAnswer {
  return {
    Id: Number(row.id),
    Api_Key: row.api_key,
    Name: row.display_name,
    Email: row.email,
    Phone: row.phone,
    Parent: Number(row.parent),
    Custno: Number(row.custno),
    StartDate: nullableDate(row.start_date),
    EndDate: nullableDate(row.end_date),
    DayPass: Number(row.day_pass),
    Require_Https: Number(row.require_https),
    AllowHours: nullableNumber(row.allow_hours),
    ResponseFormat: row.response_format,
    LogLevel: Number(row.log_level),
    LogRaw: Number(row.log_raw),
    MaxHits: row.max_hits ?? '',
    GroupId: groups.map((group) => group.Id).join(','),
    Created: httpDate(Number(row.created_at)),
    Created_By: nullableNumber(row.created_by),
  }
}

/**
 * GET /account/read/license (D14). Each maximum is the one that bounds the caller (its
 * tenant's or its parent's) and its count the one that maximum is judged against.
 * Maxima null = unlimited; People null when no enabled plugin keeps people.
 */
export interface LicenseAnswer {
  Parent: number
  Custno: number
  Plugins: string[]
  MaxKeys: number | null
  MaxPeople: number | null
  MaxPlayers: number | null
  Keys: number
  People: number | null
  Players: number
}

export function licenseAnswer(caller: CallerKey, plugins: readonly string[], { maxima, usage }: TenantLicense): LicenseAnswer {
  return {
    Parent: caller.parent,
    Custno: caller.custno,
    Plugins: [...plugins],
    MaxKeys: maxima.MaxKeys,
    MaxPeople: maxima.MaxPeople,
    MaxPlayers: maxima.MaxPlayers,
    Keys: usage.Keys,
    People: usage.People,
    Players: usage.Players,
  }
}

/*
 * JSON schemas of the answers above (Route.answer), for the OpenAPI document;
 * test/openapi-answers.test.ts holds them to the real answers.
 */

const integer = { type: 'integer' }
const text = { type: 'string' }
const nullableText = { type: ['string', 'null'] }
const optionalDate = { type: ['string', 'null'], description: 'An HTTP-date (D9); null when not set.' }
const unlimited = { type: ['integer', 'null'], description: "The maximum that bounds the caller: its tenant's, or its parent's when that leaves less room; null = unlimited." }

export const userAnswerSchema = recordSchema({
  Id: integer,
  Api_Key: text,
  Name: text,
  Email: nullableText,
  Phone: nullableText,
  Parent: integer,
  Custno: integer,
  StartDate: optionalDate,
  EndDate: optionalDate,
  DayPass: integer,
  Require_Https: integer,
  AllowHours: { type: ['number', 'null'] },
  ResponseFormat: text,
  LogLevel: integer,
  LogRaw: integer,
  MaxHits: { type: 'string', description: 'Canonical MaxHits (D7); "" when the key has no limit.' },
  GroupId: { type: 'string', description: 'The key\'s group ids, comma-separated.' },
  Created: { type: 'string', description: 'An HTTP-date (D9).' },
  Created_By: { type: ['integer', 'null'], description: 'The key that created this one; null for a key the operator made.' },
} satisfies Record<keyof UserAnswer, object>)

export const groupsAnswerSchema = recordListSchema({ Id: integer, Display_Name: text, Paths: { type: 'array', items: text } })

/** A count of the license: where the maximum beside it applies (the whole parent when that is the parent's). */
const inUse = (maximum: string) => ({ type: 'integer', description: `In use, counted where the ${maximum} shown applies: the whole parent when it is the parent's.` })

export const licenseAnswerSchema = recordSchema({
  Parent: integer,
  Custno: integer,
  Plugins: { type: 'array', items: text, description: 'The plugins enabled in this service.' },
  MaxKeys: unlimited,
  MaxPeople: unlimited,
  MaxPlayers: unlimited,
  Keys: inUse('MaxKeys'),
  People: { ...inUse('MaxPeople'), type: ['integer', 'null'], description: `${inUse('MaxPeople').description} null when no enabled plugin keeps people.` },
  Players: inUse('MaxPlayers'),
} satisfies Record<keyof LicenseAnswer, object>)

export const playersAnswerSchema = recordListSchema({
  Id: integer,
  Name: text,
  DispGroup: text,
  Location: text,
  Last_Seen: { type: ['string', 'null'], description: 'The player\'s last GET /People/Read/Today (HTTP-date); null before its first.' },
})
