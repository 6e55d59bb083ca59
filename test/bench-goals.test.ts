/**
 * `npm run bench` prints each issue-19 goal as one line, its figures beside MET or NOT
 * MET (scripts/bench/goals.ts). A figure is rounded for reading, but never so that it
 * reads as the other side of its target: a goal-2 median of 0.846 once printed as
 * `0.85x level 0 (target >= 0.85) ... NOT MET`.
 */
import t from 'tap'
import { figure, formatGoal, ms, ratio, shortOf, type Target } from '../scripts/bench/goals.ts'

const atLeast = (target: number): Target => (value) => value >= target
const below = (target: number): Target => (value) => value < target

t.test('a figure far from its target keeps its usual rounding', async (t) => {
  t.equal(ratio(0.7049, atLeast(0.9)), '0.70x')
  t.equal(ratio(1.2345, atLeast(0.85)), '1.23x')
  t.equal(ms(33.26, below(20)), '33.3 ms')
  t.equal(ms(15, below(20)), '15 ms', 'no trailing .0')
  t.equal(figure(3.71, 1, below(4)), '3.7')
  t.equal(figure(228.6, 0, below(300)), '229')
})

t.test('a figure that rounds onto its target gets the decimals that show which side it is on', async (t) => {
  t.equal(ratio(0.849, atLeast(0.85)), '0.849x', 'just short of >= 0.85')
  t.equal(ratio(0.8496, atLeast(0.85)), '0.8496x')
  t.equal(ratio(0.8951, atLeast(0.9)), '0.895x', '0.90 would read as met')
  t.equal(ratio(1.503, (value) => value <= 1.5), '1.503x', 'just past <= 1.5')
  t.equal(ms(19.96, below(20)), '19.96 ms', 'met, though one decimal reads 20')
  t.equal(ms(20.04, below(20)), '20 ms', '20.0 already fails < 20')
  t.equal(figure(3.96, 1, below(4)), '3.96', 'an import just under 4 s')
  t.equal(figure(299.6, 0, below(300)), '299.6', 'RSS just under 300 MB')
})

t.test('a figure on the target itself, or with no target, prints as it rounds', async (t) => {
  t.equal(ratio(0.85, atLeast(0.85)), '0.85x')
  t.equal(ratio(0.849), '0.85x', 'no target given: two decimals')
  t.equal(ms(19.96), '20 ms')
})

t.test('the printed figure and the status always agree', async (t) => {
  const target = atLeast(0.85)
  for (let value = 0.8; value <= 0.9; value += 0.00037) {
    const printed = Number(ratio(value, target).slice(0, -1))
    t.equal(target(printed), target(value), `${value} printed as ${printed}`)
  }
})

t.test('a goal line names the goal, what was measured, the database and its status', async (t) => {
  t.equal(formatGoal({ goal: 2, name: 'log2', database: 'sqlite', measured: `${ratio(0.849, atLeast(0.85))} level 0 (target >= 0.85)`, status: 'NOT MET' }),
    'goal 2 log2 sqlite: 0.849x level 0 (target >= 0.85) NOT MET')
})

t.test('a run short of the count a goal names says so on its line', async (t) => {
  t.equal(shortOf(3000, 100_000, 'people'), ' (only 3000 people: the goal is 100000)')
  t.equal(shortOf(100_000, 100_000, 'people'), '', 'the whole count: nothing said')
  t.equal(shortOf(1_200_000, 1_000_000, 'keys'), '')
})
