import { UsageError } from './command.ts'

export { UsageError }

type Options = Record<string, string | string[] | boolean | undefined>

/** A required whole-number option. */
export function wholeNumber(options: Options, name: string): number {
  const value = options[name]
  if (typeof value !== 'string' || !/^\d{1,15}$/.test(value)) throw new UsageError(`--${name} needs a whole number`)
  return Number(value)
}
