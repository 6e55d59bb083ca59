/**
 * JSON schemas of the log plugin's answers (Route.answer): what the OpenAPI document
 * shows a client gets, built from index.ts (Log, History), limits.ts, levels.ts and
 * usage.ts. test/openapi-answers.test.ts holds them to the real answers.
 */
import { recordListSchema, recordSchema } from '../../kernel/sdk.ts'

const integer = { type: 'integer' }
const text = { type: 'string' }
const nullableText = { type: ['string', 'null'] }
const nullableInteger = { type: ['integer', 'null'] }
const httpDateText = { type: 'string', description: 'An HTTP-date (D9).' }
const detail = (description = 'Kept at LogLevel 2 and above.') => ({ type: ['string', 'null'], description })

/** POST /Api/Read/Log: the record of interface 2.3 in its order, then D8's Rsponse and Secret. */
export const logAnswerSchema = recordSchema({
  RequestTime: httpDateText,
  Http_Host: nullableText,
  Server_Name: nullableText,
  Server_Addr: nullableText,
  Server_Port: nullableInteger,
  Remote_Addr: nullableText,
  Request_Scheme: nullableText,
  Request_Method: text,
  Api_Acl: { type: ['integer', 'null'], description: 'The ACL entry that allowed the call.' },
  Api_Function: { type: 'string', description: 'The path called.' },
  Request_Url: detail(),
  Http_User_Agent: detail(),
  Raw_Request: detail('Kept at LogLevel 2 and above, for LogRaw days.'),
  Response_Code: integer,
  Rsponse: { description: 'The answer as sent (its JSON value; an error\'s `Error: ...` text); kept at LogLevel 2 and above, else null.' },
  Bandwidth: { type: 'integer', description: 'Bytes of the answer.' },
  Response_Format: nullableText,
  Seconds: { type: 'number' },
  Secret: { type: ['string', 'null'], enum: ['current', 'previous', null], description: 'Which secret signed the call: "previous" during a rotation\'s overlap; null without a key.' },
})

/** POST /Api/Read/History: one page of the key's calls, newest first. */
export const historyAnswerSchema = recordSchema({
  Total: integer,
  Page: { type: 'string', description: '"<page> of <pages>".' },
  Calls: recordListSchema({
    Id: { type: 'integer', description: 'The call\'s x-RequestID (its LogRequestId).' },
    RequestTime: httpDateText,
    Request_Method: text,
    Api_Function: text,
    Api_Acl: nullableInteger,
    Response_Code: integer,
    Seconds: { type: 'number' },
    Bandwidth: integer,
  }),
})

/** One rate-limit window now (D7). */
const windowState = recordSchema({
  Limit: integer,
  Remain: integer,
  ResetDate: httpDateText,
  TimeLeft: { type: 'string', description: 'Whole units, rounded up: "42 Seconds", "5 Minutes", "3 Hours", "12 Days".' },
})

/** A tenant's quota windows, by label. */
const windowsByLabel = (description: string) => ({ type: 'object', additionalProperties: windowState, description })

/**
 * GET /Api/Read/Limits: one member per window of the key's MaxHits, by its label (`1Sec`,
 * `1Day`), then Tenant, ParentTenant and Credits where there are any.
 */
export const limitsAnswerSchema = {
  type: 'object',
  properties: {
    Tenant: windowsByLabel('The tenant\'s own MaxHits windows (every key of the tenant counts), where it has any.'),
    ParentTenant: windowsByLabel('The whole parent\'s MaxHits windows, for a key of a customer whose parent has any.'),
    Credits: {
      ...recordSchema({
        Remain: { type: 'integer', description: 'Calls left now.' },
        Refill: { ...recordSchema({ Amount: integer, Every: { type: 'string', enum: ['1Day', '1Mon'] } }), type: ['object', 'null'] },
        RefillDate: { type: ['string', 'null'], description: 'The next refill (HTTP-date); null without a Refill.' },
        TimeLeft: { type: ['string', 'null'], description: 'Until the next refill; null without a Refill.' },
      }),
      description: 'Only for a key with Credits (not unlimited).',
    },
  },
  additionalProperties: windowState,
}

/** GET /Access/Level/List. */
export const levelsAnswerSchema = recordListSchema({
  Level: integer,
  Name: text,
  Stores: { type: 'array', items: text, description: 'The log record fields a call at this level keeps.' },
})

/** POST /Api/Read/Usage. */
export const usageAnswerSchema = recordSchema({
  KeyId: { type: ['integer', 'null'], description: 'The key asked for; null: the whole tenant.' },
  Range: { type: 'string', enum: ['24h', '30d'] },
  Step: { type: 'string', enum: ['1Hour', '1Day'] },
  From: httpDateText,
  To: httpDateText,
  Total: integer,
  Calls: {
    ...recordListSchema({ Time: { type: 'string', description: 'The bucket\'s start (HTTP-date).' }, Status: integer, Count: integer }),
    description: 'One row per bucket and status that had calls, oldest first.',
  },
  Windows: {
    ...recordListSchema({ Window: text, Limit: nullableInteger, Remain: integer, ResetDate: nullableText, TimeLeft: nullableText }),
    description: 'The key\'s rate-limit windows, the tenant\'s (`Tenant 1Mon`, `ParentTenant 1Mon`) and its Credits, now.',
  },
})
