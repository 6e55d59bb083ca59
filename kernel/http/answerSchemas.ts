/**
 * Helpers for a route's `answer` schema (Route.answer), the JSON schema the OpenAPI
 * document gives as the operation's 200: most answers are records whose every field is
 * always there (null where the field's own schema allows it), or lists of them. Records
 * stay open (no additionalProperties), so a field added later breaks no client's check.
 */
export function recordSchema(properties: Record<string, object>): { type: 'object'; required: string[]; properties: Record<string, object> } {
  return { type: 'object', required: Object.keys(properties), properties }
}

/** A list of `recordSchema(properties)` records. */
export function recordListSchema(properties: Record<string, object>): { type: 'array'; items: ReturnType<typeof recordSchema> } {
  return { type: 'array', items: recordSchema(properties) }
}
