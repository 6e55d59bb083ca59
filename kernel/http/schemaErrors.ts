import type { ErrorObject } from 'ajv'

// Ajv's type names as a reader says them ("must be integer,string,array" reads like debug output).
const typeNames: Record<string, string> = {
  integer: 'an integer', number: 'a number', string: 'a string', array: 'an array', object: 'an object', boolean: 'true or false', null: 'null',
}

/** "an integer, a string or an array" */
function typeList(types: string | string[]): string {
  const names = (Array.isArray(types) ? types : types.split(',')).map((type) => typeNames[type] ?? type)
  return names.length === 1 ? names[0]! : `${names.slice(0, -1).join(', ')} or ${names.at(-1)}`
}

/** Turns Ajv's first error into a message naming the field (D6: clear 400s). */
export function describeSchemaError(error: ErrorObject, where: 'body' | 'query'): string {
  const field = error.instancePath ? error.instancePath.slice(1).replaceAll('/', '.') : ''
  // The bound of a length or size keyword (minLength, maxItems, ...).
  const limit = (error.params as { limit?: number }).limit
  switch (error.keyword) {
    case 'required':
      return `${field ? field + '.' : ''}${(error.params as { missingProperty: string }).missingProperty} is required.`
    case 'additionalProperties': {
      const name = (error.params as { additionalProperty: string }).additionalProperty
      const kind = where === 'body' ? 'field' : 'parameter'
      // "Error:  is not a known field." names nothing.
      if (name === '') return `${field ? field + ': a' : 'A'} ${kind} name must not be empty.`
      return `${field ? field + '.' : ''}${name} is not a known ${kind}.`
    }
    case 'enum':
      return `${field || where} must be one of ${(error.params as { allowedValues: unknown[] }).allowedValues.map((value) => value === null ? 'null' : value === '' ? '""' : String(value)).join(', ')}.`
    case 'type':
      return `${field || where} must be ${typeList((error.params as { type: string | string[] }).type)}.`
    case 'minLength':
      return limit === 1 ? `${field || where} must not be empty.` : `${field || where} must be at least ${limit} characters long.`
    case 'maxLength':
      return `${field || where} must be at most ${limit} characters long.`
    case 'minItems':
      return `${field || where} must have at least ${limit} item${limit === 1 ? '' : 's'}.`
    case 'maxItems':
      return `${field || where} must have at most ${limit} items.`
    case 'uniqueItems': {
      // Ajv's "must NOT have duplicate items (items ## 1 and 0 are identical)": the value, when it is plain (verbose errors carry the list).
      const { i, j } = error.params as { i: number; j: number }
      const repeated = Array.isArray(error.data) ? error.data[i] : undefined
      return typeof repeated === 'string' || typeof repeated === 'number' || typeof repeated === 'boolean'
        ? `${field || where}: ${typeof repeated === 'string' ? `'${repeated}'` : String(repeated)} is given twice.`
        : `${field || where}: items ${j + 1} and ${i + 1} are the same; give each once.`
    }
    default:
      return `${field || where} ${error.message}.`
  }
}
