/**
 * The part of autocannon's programmatic API the benchmark uses (the package ships no types).
 * See autocannon's README, "API": `autocannon(opts)` returns an EventEmitter that is also a
 * promise of the aggregated result.
 */
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Options {
      /** One target, or several: connection i goes to `url[i % url.length]`. */
      url: string | string[];
      /** Concurrent connections (closed loop: each sends its next request when the last answered). @defaultValue 10 */
      connections?: number;
      /** Seconds to run. @defaultValue 10 */
      duration?: number;
      /** Requests in flight per connection. @defaultValue 1 */
      pipelining?: number;
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      /** Seconds before a request counts as a timeout. @defaultValue 10 */
      timeout?: number;
    }

    /** Percentiles of one histogram (autocannon records latency in whole milliseconds). */
    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      p50: number;
      p99: number;
      total: number;
    }

    interface Result {
      /** Seconds the run lasted. */
      duration: number;
      errors: number;
      timeouts: number;
      non2xx: number;
      '2xx': number;
      latency: Histogram;
      requests: Histogram & { sent: number };
    }

    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
      /** `response`: one answered request; `responseTime` is in ms with sub-ms precision. */
      on(
        event: 'response',
        listener: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void,
      ): this;
      on(event: 'reqError', listener: (err: Error) => void): this;
      on(event: string, listener: (...args: unknown[]) => void): this;
    }
  }

  function autocannon(opts: autocannon.Options): autocannon.Instance;
  export = autocannon;
}
