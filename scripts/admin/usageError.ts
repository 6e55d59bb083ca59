import { UsageError, wholeNumberOption } from './command.ts'

export { UsageError }

type Options = Record<string, string | string[] | boolean | undefined>

/** A required whole-number option. */
export function wholeNumber(options: Options, name: string): number {
  return wholeNumberOption(options[name], name)
}
