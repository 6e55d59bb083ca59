/** What `promise` failed with (a driver's error carries its `code`), or null when it succeeded. */
export const failure = (promise: Promise<unknown>) => promise.then(() => null, (error: unknown) => error as Error & { code?: string })
