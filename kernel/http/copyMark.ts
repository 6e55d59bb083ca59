/**
 * Classes a plugin hands back to the kernel (ApiError, RawAnswer, JsonText) are
 * recognised by a `Symbol.for` mark, not by `instanceof`: a plugin from outside the
 * repository may load its own copy of their modules (through `keygate/sdk`).
 */
export function carriesMark(value: unknown, mark: symbol): boolean {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[mark] === true
}
