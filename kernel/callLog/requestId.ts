/**
 * Request ids (D8): made by the server, known before the log record is written and
 * unique across processes: milliseconds since 2024 (41 bits), node id (4 bits) and a
 * per-millisecond sequence (8 bits) = 53 bits, a safe JavaScript integer. When the
 * sequence runs out the generator borrows the next millisecond, so ids stay unique
 * and increasing, and an id's time is never more than a moment ahead.
 */
const epoch = Date.UTC(2024, 0, 1)
const sequenceBits = 8
const nodeBits = 4
const lowBits = 2 ** (sequenceBits + nodeBits)

export class RequestIds {
  private lastMs = 0
  private sequence = 0

  constructor(private nodeId: number, private readonly clock: () => number = Date.now) {
    checkNodeId(nodeId)
  }

  /**
   * Goes on under another node id: the node registry gave this process a new one
   * because another process took over its old one (D16). Follow with `resumeAfter`.
   */
  useNode(nodeId: number): void {
    checkNodeId(nodeId)
    this.nodeId = nodeId
  }

  /**
   * Continues strictly after `lastId` (the highest id already in the log), so a
   * restart on a clock that was set back, or a test's fixed clock, cannot make an id
   * twice. When the clock is ahead of it, this changes nothing.
   */
  resumeAfter(lastId: number): void {
    const lastMs = Math.floor(lastId / lowBits)
    if (lastMs < this.lastMs) return
    this.lastMs = lastMs
    this.sequence = 2 ** sequenceBits - 1
  }

  next(): number {
    const now = this.clock() - epoch
    if (now > this.lastMs) {
      this.lastMs = now
      this.sequence = 0
    } else if (++this.sequence >= 2 ** sequenceBits) {
      this.lastMs++
      this.sequence = 0
    }
    return this.lastMs * lowBits + this.nodeId * 2 ** sequenceBits + this.sequence
  }
}

/** How many node ids request ids can tell apart (0 to nodeCount - 1). */
export const nodeCount = 2 ** nodeBits

function checkNodeId(nodeId: number): void {
  if (!Number.isInteger(nodeId) || nodeId < 0 || nodeId >= nodeCount) throw new Error(`nodeId must be 0-${nodeCount - 1}`)
}

/** The smallest id that could have been made at `timeMs` (for purging by age). */
export function firstIdAt(timeMs: number): number {
  return Math.max(0, timeMs - epoch) * lowBits
}

/**
 * How much later than its request's arrival (RequestTime) an id can be made: once the
 * body is in, so at most `timeouts.requestMs`, which config caps at this.
 */
export const idLagLimitMs = 3_600_000

export function timeOfId(id: number): number {
  return Math.floor(id / lowBits) + epoch
}

/** The node id (0-15) of the process that made a request id. */
export function nodeOfId(id: number): number {
  return Math.floor((id % lowBits) / 2 ** sequenceBits)
}
