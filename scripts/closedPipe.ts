/**
 * `... | head` closes our stdout early: the reader has what it wanted, so stop
 * quietly (exit 0) instead of crashing with an EPIPE stack trace. Other stdout
 * errors still surface.
 */
export function exitQuietlyOnClosedPipe(): void {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(0)
    throw error
  })
}
