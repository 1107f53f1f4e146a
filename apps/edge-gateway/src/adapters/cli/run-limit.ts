import { ApiError } from '../../errors';

/** A request waiting for a run. */
interface Waiter {
  /** Hands the waiter a slot already counted in `running`, with the function that ends it. */
  grant(release: () => void): void;
  reject(reason: unknown): void;
}

/**
 * The bound on one CLI adapter's runs (README "Adapters": `max_concurrency`, `max_waiting`): at
 * most `maxConcurrency` runs at once in this process, over every provider and route that shares the
 * adapter; up to `maxWaiting` more requests wait, first come first served; one more is refused at
 * once with 429 `rate_limit_exceeded` and `Retry-After`. In-process only: a direct route takes no
 * lease, job or count in Redis. A wait ends when its request's signal aborts (client gone,
 * `gateway.request_timeout_ms` passed, shutdown).
 */
export class RunLimit {
  private running = 0;
  private readonly waiting: Waiter[] = [];

  /** @throws Error when `maxConcurrency` is not an integer ≥ 1 or `maxWaiting` not an integer ≥ 0. */
  constructor(
    readonly adapterId: string,
    readonly maxConcurrency: number,
    readonly maxWaiting: number,
  ) {
    if (!Number.isInteger(maxConcurrency) || maxConcurrency < 1)
      throw new Error(`CLI adapter "${adapterId}": max_concurrency must be a whole number, 1 or more.`);
    if (!Number.isInteger(maxWaiting) || maxWaiting < 0)
      throw new Error(`CLI adapter "${adapterId}": max_waiting must be a whole number, 0 or more.`);
  }

  /** Runs going now. */
  get inFlight(): number {
    return this.running;
  }

  /** Requests waiting for a run. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * Resolves once a run may start, with the function that ends it (call it once the program is
   * gone; later calls do nothing).
   * @throws ApiError 429 `rate_limit_exceeded` (Retry-After 1 s) when `maxWaiting` requests already
   *   wait; `signal.reason` when it aborts first (the request leaves the line).
   */
  async acquire(signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) throw signal.reason;
    if (this.running < this.maxConcurrency) {
      this.running++;
      return this.release();
    }
    if (this.waiting.length >= this.maxWaiting) {
      throw new ApiError({
        code: 'rate_limit_exceeded',
        fields: { cliAdapter: this.adapterId, running: this.maxConcurrency, waiting: this.maxWaiting },
      });
    }
    return new Promise<() => void>((resolve, reject) => {
      const waiter: Waiter = {
        grant: (release) => {
          signal.removeEventListener('abort', onAbort);
          resolve(release);
        },
        reject,
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  /** Refuses every waiting request with `reason` (the adapter is closing). */
  close(reason: unknown): void {
    for (const waiter of this.waiting.splice(0)) waiter.reject(reason);
  }

  /**
   * The end of one counted run: its slot goes straight to the first waiter (still counted, so no
   * later arrival can take it in between), or is freed.
   */
  private release(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next.grant(this.release());
      else this.running--;
    };
  }
}
