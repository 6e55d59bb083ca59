/**
 * JSON schemas of the api plugin's answers (Route.answer): what the OpenAPI document
 * shows a client gets, built from operations.ts, changes.ts, servers.ts and openapi.ts.
 * test/openapi-answers.test.ts holds them to the real answers.
 */
import { recordListSchema, recordSchema } from '../../kernel/sdk.ts'

const integer = { type: 'integer' }
const text = { type: 'string' }

/** GET /Api/Read/List (json: a route's schemas as JSON; xml carries each as its JSON text). */
export const operationsAnswerSchema = recordListSchema({
  Method: { type: 'string', enum: ['GET', 'POST'] },
  Path: text,
  Display_Name: { type: ['string', 'null'] },
  Plugin: text,
  Needs: { type: 'string', enum: ['key,date,hmac', 'key,date,hmac,today'], description: 'The credential items a call sends.' },
  Cached: { type: 'integer', description: 'Seconds an answer is cached; 0 = not cached.' },
  Body: { type: ['object', 'null'], description: 'The JSON schema of the body; null: the operation takes none.' },
  Query: { type: ['object', 'null'], description: 'The JSON schema of the query parameters; null: none but format.' },
})

/** GET /Api/Read/Changes: the change history, newest first (D15). */
export const changesAnswerSchema = recordListSchema({
  Date: { type: 'string', description: 'YYYY-MM-DD, the day the change landed.' },
  Version: text,
  Kind: { type: 'string', enum: ['added', 'modified', 'removed'] },
  Breaking: { type: 'integer', enum: [0, 1] },
  Operation: { type: 'string', description: 'Method and canonical path, e.g. "POST /Api/Create/Key".' },
  Description: text,
})

/** GET /Api/Read/Servers: the live processes (D16). */
export const serversAnswerSchema = recordListSchema({
  Server_Name: text,
  Server_Addr: { type: ['string', 'null'] },
  Server_Port: integer,
  Node_Id: integer,
  Started: { type: 'string', description: 'An HTTP-date (D9).' },
  Last_Seen: { type: 'string', description: 'The process\'s last heartbeat (HTTP-date).' },
  Version: text,
})

/** GET /Api/Read/OpenApi: this document (its own type, JSON), as OpenAPI 3.1 describes it. */
export const openApiAnswerSchema = recordSchema({
  openapi: { type: 'string', const: '3.1.0' },
  info: { type: 'object', description: 'title, version (the service\'s) and description.' },
  servers: { type: 'array', items: { type: 'object' }, description: 'The base path.' },
  tags: { type: 'array', items: { type: 'object' }, description: 'One per plugin.' },
  paths: { type: 'object', description: 'Every mounted operation.' },
  components: { type: 'object', description: 'The signature as security schemes.' },
})
