/** The `count` integers from `from` on: `consecutive(2, 3)` is `[2, 3, 4]`. */
export const consecutive = (from: number, count: number) => Array.from({ length: count }, (_, index) => from + index)
