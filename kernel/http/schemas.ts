import { Ajv, type ValidateFunction } from 'ajv'
import { describeSchemaError } from './schemaErrors.ts'

/**
 * The one schema layer every route and plugin validates input with, so a rule about
 * what text the service accepts is made here once and no plugin can forget it.
 * Bodies are taken as sent; query values arrive as strings and are coerced.
 */
export function newSchemaCompiler(input: 'body' | 'query'): Ajv {
  return new Ajv({ allErrors: false, coerceTypes: input === 'query', useDefaults: true, strict: false })
}

/**
 * A check of values against `schema` outside a route's own body or query (e.g. each row
 * of an import): the first violation as the same text a 400 would carry, or null.
 */
export function schemaCheck(schema: object, where: 'body' | 'query' = 'body'): (value: unknown) => string | null {
  const validate: ValidateFunction = newSchemaCompiler(where).compile(schema)
  return (value) => (validate(value) ? null : describeSchemaError(validate.errors![0], where))
}
