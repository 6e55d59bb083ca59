/** The benchmark's settings, read from the environment once (see scripts/bench.ts). */
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { maxWorkers } from '../../kernel/boot/config.ts'

export const benchRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const seconds = Number(process.env.BENCH_SECONDS ?? 10)
export const connections = Number(process.env.BENCH_CONNECTIONS ?? 50)
/** Alternating runs per goal-1/2 measurement (median taken). */
export const rounds = Number(process.env.BENCH_ROUNDS ?? 3)
export const databaseUrl = process.env.DATABASE_URL ?? null
/** Processes (WORKERS) of the service goal 3's listings are loaded on; 1 unless set. */
export const peopleWorkers = Number(process.env.BENCH_PEOPLE_WORKERS ?? 1)
// The service's own bound (config.ts); said before an import's minutes, not after.
if (!Number.isInteger(peopleWorkers) || peopleWorkers < 1 || peopleWorkers > maxWorkers) {
  throw new Error(`BENCH_PEOPLE_WORKERS must be a whole number from 1 to ${maxWorkers}, got '${process.env.BENCH_PEOPLE_WORKERS}'.`)
}
/** Goal 3's loads: the first page, the deep page by number, the same page by cursor. */
export const peopleCaseNames = ['first', 'number', 'cursor'] as const
export type PeopleCase = (typeof peopleCaseNames)[number]
/** Which of them run, in this order (all three unless BENCH_PEOPLE_CASES says): to profile one alone, or to run them in another order. */
export const peopleCases = (process.env.BENCH_PEOPLE_CASES ?? peopleCaseNames.join(',')).split(',').map((name) => name.trim()) as PeopleCase[]
if (peopleCases.some((name) => !peopleCaseNames.includes(name)) || new Set(peopleCases).size !== peopleCases.length) {
  throw new Error(`BENCH_PEOPLE_CASES lists some of ${peopleCaseNames.join(', ')}, each once, separated by commas; got '${process.env.BENCH_PEOPLE_CASES}'.`)
}
export const databaseName: 'sqlite' | 'mariadb' = databaseUrl ? 'mariadb' : 'sqlite'
