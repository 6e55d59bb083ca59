/**
 * glibc malloc settings for a process that serves calls, read by glibc from the
 * environment when the process starts: `npm start`, deploy/Dockerfile and
 * deploy/keygate.service set them (test/production-start checks all three), a cluster's
 * primary gives them to its workers when it was started without them, and the bench sets
 * them on the service it measures. docs/deploy.md, "Memory".
 *
 * Why: glibc gives memory at the top of its heap back to the kernel once more than its
 * trim threshold (128 KiB at start) is free there. Answers of 45 KB pages are freed in
 * bulk when V8 collects their buffers, several MB at a time, so the heap was given back
 * and taken again, page fault by page fault: under a load of 100-person pages 320-407
 * `brk` calls and 19,000-32,000 faults in 2 s, about 100 µs more CPU a page (2026-11-29,
 * docs/benchmarks.md).
 * glibc raises the threshold by itself the first time a block of 128 KiB or more that it
 * mapped is freed (mallopt(3)), but only to twice that block, and only when one comes by:
 * some runs of the same process did, some not. Set here: blocks under 16 MiB come from the
 * heap, and up to 32 MiB of free heap stays with the process (its RSS can be that much
 * higher after a burst of large answers).
 */
export const mallocSettings: Readonly<Record<string, string>> = {
  MALLOC_MMAP_THRESHOLD_: String(16 * 1024 * 1024),
  MALLOC_TRIM_THRESHOLD_: String(32 * 1024 * 1024),
}

/** The settings `environment` lacks (an operator's own values are kept). */
export function missingMallocSettings(environment: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(mallocSettings).filter(([name]) => environment[name] === undefined))
}
