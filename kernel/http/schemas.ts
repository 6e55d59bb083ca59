import { Ajv, type AnySchema, type ErrorObject, type ValidateFunction } from 'ajv'
import { describeSchemaError } from './schemaErrors.ts'
import { textProblem } from './textRule.ts'

/**
 * The keyword every input schema gets at its root (see compileInput): the text rule of
 * textRule.ts applied to every string and field name at any depth of the value, whatever
 * the schema itself declares, so no route or plugin can forget it.
 */
const textKeyword = 'x-keygate-text'

/**
 * A body schema may name top-level properties that hold rows a plugin checks one by one
 * with schemaCheck (which applies the text rule to each row), so one bad row is rejected
 * alone instead of failing the whole body (an import batch: issue 5, "a bad row never
 * aborts the batch"). The rest of the body keeps the rule here.
 */
export const rowsKeyword = 'x-keygate-rows'

function checkText(setting: boolean | string[], data: unknown): boolean {
  let checked = data
  if (Array.isArray(setting) && checked !== null && typeof checked === 'object' && !Array.isArray(checked)) {
    checked = Object.fromEntries(Object.entries(checked).filter(([name]) => !setting.includes(name)))
  }
  const problem = textProblem(checked)
  if (problem === null) return true
  const error: Partial<ErrorObject> = {
    keyword: 'text',
    instancePath: problem.path.map((part) => `/${String(part).replaceAll('~', '~0').replaceAll('/', '~1')}`).join(''),
    params: {},
    message: problem.message,
  }
  ;(checkText as unknown as { errors: Partial<ErrorObject>[] }).errors = [error]
  return false
}

/**
 * The one schema layer every route and plugin validates input with, so a rule about
 * what text the service accepts is made here once and no plugin can forget it.
 * Bodies are taken as sent; query values arrive as strings and are coerced.
 * Compile input schemas with compileInput, which adds the text rule.
 */
export function newSchemaCompiler(input: 'body' | 'query'): Ajv {
  // verbose: an error carries the value it is about, so a text can name it (a duplicate item, schemaErrors.ts).
  const ajv = new Ajv({ allErrors: false, coerceTypes: input === 'query', useDefaults: true, strict: false, verbose: true })
  ajv.addKeyword({ keyword: textKeyword, schemaType: ['boolean', 'array'], errors: true, validate: checkText })
  ajv.addKeyword({ keyword: rowsKeyword, schemaType: 'array' })
  return ajv
}

/** Compiles an input schema with the text rule added at its root (beside the schema's own keywords). */
export function compileInput(ajv: Ajv, schema: AnySchema): ValidateFunction {
  const root = typeof schema === 'boolean' ? (schema ? {} : { not: {} }) : schema
  const rows = (root as Record<string, unknown>)[rowsKeyword]
  return ajv.compile({ ...root, [textKeyword]: Array.isArray(rows) ? rows : true })
}

// What a query value may be spelt as where the schema wants a number: Ajv's coercion
// (Number()) also takes 0x10, 1e2, +1, " 1" and 1.0, which a JSON body would refuse.
const plainInteger = /^-?[0-9]+$/
const plainNumber = /^-?[0-9]+(?:\.[0-9]+)?$/

/**
 * Compiles a query schema: compileInput, and before it a check that each top-level
 * parameter the schema types as integer or number is written as plain decimal digits.
 */
export function compileQuery(ajv: Ajv, schema: AnySchema): ValidateFunction {
  const validate = compileInput(ajv, schema)
  const properties = typeof schema === 'object' ? ((schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {}) : {}
  const numeric = Object.entries(properties).flatMap(([name, property]) => {
    const types = [property?.type].flat()
    if (types.includes('string')) return []
    if (types.includes('number')) return [{ name, type: 'number', spelling: plainNumber }]
    return types.includes('integer') ? [{ name, type: 'integer', spelling: plainInteger }] : []
  })
  if (numeric.length === 0) return validate
  const checked = ((query: Record<string, unknown>) => {
    for (const { name, type, spelling } of numeric) {
      const value = query[name]
      if (typeof value === 'string' && !spelling.test(value)) {
        checked.errors = [{ keyword: 'type', instancePath: `/${name}`, schemaPath: '', params: { type }, message: `must be ${type}` }]
        return false
      }
    }
    const valid = validate(query)
    checked.errors = validate.errors
    return valid
  }) as ValidateFunction
  return checked
}

/**
 * A check of values against `schema` outside a route's own body or query (e.g. each row
 * of an import): the first violation as the same text a 400 would carry, or null.
 */
export function schemaCheck(schema: object, where: 'body' | 'query' = 'body'): (value: unknown) => string | null {
  const validate: ValidateFunction = compileInput(newSchemaCompiler(where), schema)
  return (value) => (validate(value) ? null : describeSchemaError(validate.errors![0], where))
}
