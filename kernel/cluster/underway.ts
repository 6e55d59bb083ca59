/**
 * Work still under way that a stop waits for before it closes what the work uses (a
 * database write, a Redis publish): each promise leaves the set once settled, so the
 * set holds only what is unfinished.
 */
export class Underway {
  private readonly promises = new Set<Promise<unknown>>()

  /** Tracks `promise` until it settles; returns it. */
  add<T>(promise: Promise<T>): Promise<T> {
    this.promises.add(promise)
    const done = () => void this.promises.delete(promise)
    promise.then(done, done)
    return promise
  }

  /**
   * Settles once everything under way now has (failures included: each reports its own);
   * undefined when nothing is, so a caller on a hot path pays for no promise.
   */
  settled(): Promise<void> | undefined {
    return this.promises.size === 0 ? undefined : Promise.allSettled([...this.promises]).then(() => undefined)
  }
}
