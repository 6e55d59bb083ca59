import type { ErrorObject } from 'ajv'

/** Turns Ajv's first error into a message naming the field (D6: clear 400s). */
export function describeSchemaError(error: ErrorObject, where: 'body' | 'query'): string {
  const field = error.instancePath ? error.instancePath.slice(1).replaceAll('/', '.') : ''
  switch (error.keyword) {
    case 'required':
      return `${field ? field + '.' : ''}${(error.params as { missingProperty: string }).missingProperty} is required.`
    case 'additionalProperties':
      return `${field ? field + '.' : ''}${(error.params as { additionalProperty: string }).additionalProperty} is not a known ${where === 'body' ? 'field' : 'parameter'}.`
    case 'enum':
      return `${field || where} must be one of ${(error.params as { allowedValues: unknown[] }).allowedValues.map((value) => value === null ? 'null' : String(value)).join(', ')}.`
    default:
      return `${field || where} ${error.message}.`
  }
}
