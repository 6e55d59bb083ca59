#!/usr/bin/env node
/**
 * `npm start` (= `node dist/kernel/boot/main.js`, the `keygate` bin). The service itself
 * is kernel/boot/service.ts; this entry only listens for SIGTERM/SIGINT before loading it.
 * Loading the service's modules takes a few tenths of a second, and a signal in that time
 * would otherwise end the process by the signal (status 143) rather than with the clean
 * exit 0 a supervisor is promised for any stop. The signal is handed over; the service's
 * own handlers take over from there.
 */
let stopBeforeStart: string | null = null
const heard = (signal: string) => {
  stopBeforeStart ??= signal
}
process.on('SIGTERM', heard)
process.on('SIGINT', heard)

const { runService } = await import('./service.ts')
process.removeListener('SIGTERM', heard)
process.removeListener('SIGINT', heard)
runService(process.argv.slice(2), stopBeforeStart)
