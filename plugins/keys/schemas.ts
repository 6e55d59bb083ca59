/**
 * JSON schemas of the keys plugin's request bodies (interface 2.1, 4.1, 4.2), and of
 * its answers at the end (Route.answer, for the OpenAPI document). The
 * kernel compiles each once at start and answers the first violation as a 400 that
 * names the field. Rules that span fields, or need the caller or the database, are
 * checked by the handlers (keyInput.ts, groupRules.ts, tenantScope.ts).
 */
import { nameMaxLength, recordListSchema, recordSchema } from '../../kernel/sdk.ts'

// Column sizes of api_keys (coreMigrations.ts); a longer value must be a 400, not a
// database error.
const nameLength = nameMaxLength
const phoneLength = 100
/** Ids are < 2^53 everywhere (D8), so JSON numbers carry them exactly. */
const largestId = Number.MAX_SAFE_INTEGER
/** Credits fit a bigint column and stay exact as JSON numbers. */
const largestCredits = 1_000_000_000_000

const optionalText = (maxLength: number) => ({ type: ['string', 'null'], maxLength })
const flag = { type: 'integer', enum: [0, 1] }
const id = { type: 'integer', minimum: 1, maximum: largestId }

/**
 * D9: a number, a comma-separated string of numbers, or an array of numbers. One schema
 * with a type list rather than anyOf, so a violation is reported for this field plainly
 * (anyOf would report the first branch's complaint); the string's list syntax is
 * checked by parseGroupIds.
 */
const groupIdSchema = {
  type: ['integer', 'string', 'array'],
  minimum: 1,
  maximum: largestId,
  maxLength: 4000,
  items: id,
  minItems: 1,
  maxItems: 200,
}

/** The fields of interface 2.1, shared by create and edit. */
const keyFieldProperties = {
  Display_Name: { type: 'string', minLength: 1, maxLength: nameLength },
  Email: optionalText(nameLength),
  Phone: optionalText(phoneLength),
  StartDate: { type: ['string', 'null'], maxLength: 64 },
  EndDate: { type: ['string', 'null'], maxLength: 64 },
  DayPass: flag,
  Require_Https: flag,
  // Fractional hours are allowed (D3); null restores the 5-minute default. Ten years at most.
  AllowHours: { type: ['number', 'null'], minimum: 0, maximum: 87_600 },
  ResponseFormat: { type: 'string', enum: ['json', 'xml', 'csv'] },
  LogLevel: { type: 'integer', minimum: 0, maximum: 100 },
  LogRaw: { type: 'integer', minimum: 0, maximum: 3650 },
  MaxHits: optionalText(nameLength),
  GroupId: groupIdSchema,
  Defaults: {
    type: 'object',
    additionalProperties: false,
    properties: {
      Parent: { type: 'integer', minimum: 0, maximum: largestId },
      Custno: { type: 'integer', minimum: 0, maximum: largestId },
    },
  },
  // The key's own override of the ACL entry's hash method (D4); null = follow the entry.
  Require_Hash: { type: ['integer', 'null'], minimum: 0, maximum: 5 },
  // Issue 16: calls left (null = unlimited) and the count a refill sets back at each period's UTC start.
  Credits: { type: ['integer', 'null'], minimum: 0, maximum: largestCredits },
  Refill: {
    type: ['object', 'null'],
    additionalProperties: false,
    required: ['Amount', 'Every'],
    properties: {
      Amount: { type: 'integer', minimum: 1, maximum: largestCredits },
      Every: { type: 'string', enum: ['1Day', '1Mon'] },
    },
  },
} as const

export const createKeyBodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['Display_Name', 'GroupId'],
  properties: keyFieldProperties,
} as const

export const editKeyBodySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...keyFieldProperties,
    KeyId: id,
    ApiKey: { type: 'string', minLength: 1, maxLength: 64 },
    // Issue 16: adds to the key's Credits (a top-up), beside Credits which sets them.
    AddCredits: { type: 'integer', minimum: 1, maximum: largestCredits },
  },
} as const

/** POST /Api/Read/Groups takes no parameters; an empty object (or no body) is all it accepts. */
export const readGroupsBodySchema = { type: 'object', additionalProperties: false, properties: {} } as const

/** The body of create and edit as it arrives after the schema check. */
export interface KeyFieldsInput {
  Display_Name?: string
  Email?: string | null
  Phone?: string | null
  StartDate?: string | null
  EndDate?: string | null
  DayPass?: 0 | 1
  Require_Https?: 0 | 1
  AllowHours?: number | null
  ResponseFormat?: 'json' | 'xml' | 'csv'
  LogLevel?: number
  LogRaw?: number
  MaxHits?: string | null
  GroupId?: number | string | number[]
  Defaults?: { Parent?: number; Custno?: number }
  Require_Hash?: number | null
  Credits?: number | null
  Refill?: { Amount: number; Every: '1Day' | '1Mon' } | null
}

export interface CreateKeyBody extends KeyFieldsInput {
  Display_Name: string
  GroupId: number | string | number[]
}

export interface EditKeyBody extends KeyFieldsInput {
  KeyId?: number
  ApiKey?: string
  AddCredits?: number
}

/** Longest overlap of a rotation (issue 16 item 1): 30 days. */
export const longestOverlapSeconds = 30 * 86_400

/** POST /Api/Rotate/Key: the key (KeyId and/or ApiKey, as edit) and how long its old secret still signs. */
export const rotateKeyBodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['OldSecretValidFor'],
  properties: {
    KeyId: id,
    ApiKey: { type: 'string', minLength: 1, maxLength: 64 },
    OldSecretValidFor: { type: 'integer', minimum: 0, maximum: longestOverlapSeconds },
  },
} as const

export interface RotateKeyBody {
  KeyId?: number
  ApiKey?: string
  OldSecretValidFor: number
}

/** POST /Api/Read/Audit: optional filters; dates as everywhere (HTTP-date, RFC 3339, YYYY-MM-DD). */
export const readAuditBodySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    KeyId: id,
    from: { type: 'string', minLength: 1, maxLength: 64 },
    to: { type: 'string', minLength: 1, maxLength: 64 },
    page: { type: 'integer', minimum: 1, maximum: 1_000_000 },
  },
} as const

export interface ReadAuditBody {
  KeyId?: number
  from?: string
  to?: string
  page?: number
}

/*
 * JSON schemas of the answers (Route.answer): what the OpenAPI document shows a client
 * gets, built from keyAnswer.ts, rotateKey.ts, listings.ts and the kernel's audit
 * records. test/openapi-answers.test.ts holds them to the real answers.
 */

const integer = { type: 'integer' }
const text = { type: 'string' }
const nullableText = { type: ['string', 'null'] }
const nullableInteger = { type: ['integer', 'null'] }
const httpDateText = { type: 'string', description: 'An HTTP-date (D9).' }
const nullableHttpDate = { type: ['string', 'null'], description: 'An HTTP-date (D9); null when not set.' }
const apiKeyText = { type: 'string', description: 'The key string: `kg_` and 28 base62 characters (older keys: `kg_` and 22 base64url characters).' }
const maxHitsText = { type: 'string', description: 'Canonical MaxHits (D7); "" when the key has no limit.' }

const keyAnswerProperties = {
  Id: integer,
  Api_Key: apiKeyText,
  Api_Secret: { type: 'string', description: 'The secret: shown here only, never in a listing.' },
  Name: text,
  MaxHits: maxHitsText,
}

/** POST /Api/Create/Key and /Api/Edit/Key. */
export const keyAnswerSchema = recordSchema(keyAnswerProperties)

/** POST /Api/Rotate/Key: the new secret, and until when the old one still signs. */
export const rotatedKeyAnswerSchema = recordSchema({
  ...keyAnswerProperties,
  OldSecretEnds: { type: 'string', description: 'Until this HTTP-date a call signed with the old secret still passes.' },
})

const auditFields = { type: ['object', 'null'], description: 'The fields as the API names them; dates as HTTP-dates. Never a secret.' }

/** POST /Api/Read/Audit: one page of the tenant's administrative changes, newest first. */
export const auditAnswerSchema = recordSchema({
  Total: integer,
  Page: integer,
  Records: recordListSchema({
    Id: integer,
    At: httpDateText,
    Who: { type: ['integer', 'string'], description: 'The key that made the change, or "operator" (the CLI on the server).' },
    Parent: integer,
    Custno: integer,
    Action: { type: 'string', description: 'e.g. key.create, key.edit, key.rotate, webhook.edit.' },
    KeyId: nullableInteger,
    Before: auditFields,
    After: auditFields,
    RequestId: nullableInteger,
  }),
})

/** GET/POST /Api/Read/Groups: the groups the caller may assign. */
export const groupsAnswerSchema = recordListSchema({ Id: integer, Display_Name: text, Paths: { type: 'array', items: text } })

/** GET /Api/Read/Keys: the keys the caller created, never a secret. */
export const keysAnswerSchema = recordListSchema({
  Id: integer,
  Api_Key: apiKeyText,
  Display_Name: text,
  Email: nullableText,
  Phone: nullableText,
  Parent: integer,
  Custno: integer,
  StartDate: nullableHttpDate,
  EndDate: nullableHttpDate,
  Active: { type: 'integer', enum: [0, 1], description: '1 when the key works now: StartDate <= now < EndDate.' },
  DayPass: integer,
  Require_Https: integer,
  AllowHours: { type: ['number', 'null'] },
  ResponseFormat: text,
  LogLevel: integer,
  LogRaw: integer,
  MaxHits: maxHitsText,
  Require_Hash: nullableInteger,
  Groups: recordListSchema({ Id: integer, Display_Name: text }),
  Created: httpDateText,
  Credits: { type: ['integer', 'null'], description: 'Calls left now (a due refill counted); null = unlimited.' },
  Refill: { ...recordSchema({ Amount: integer, Every: { type: 'string', enum: ['1Day', '1Mon'] } }), type: ['object', 'null'] },
})
