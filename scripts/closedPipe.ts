/**
 * `... | head` closes our stdout early: the reader has what it wanted, so stop
 * quietly (exit 0) instead of crashing with an EPIPE stack trace. Any other stdout
 * error (`export > FILE` on a full disk: ENOSPC) is a failure the operator must see:
 * one line naming it, exit 1, never a stack trace.
 */
export function exitQuietlyOnClosedPipe(name: string): void {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(0)
    process.stderr.write(`${name}: the output could not be written: ${error.message}\n`)
    process.exit(1)
  })
}
