import autocannon from 'autocannon';
import { Agent, request } from 'undici';
import { littleMeanMs, mean, percentile } from './stats';

/** One bounded closed-loop load: `connections` keep one request each in flight for `durationS`. */
export interface LoadSpec {
  /** Chat Completions URL(s); autocannon spreads connections round-robin over several. */
  urls: string[];
  headers: Record<string, string>;
  body: string;
  connections: number;
  /** Seconds. */
  durationS: number;
}

/** What one load point measured. Latencies are in ms, from the client's clock. */
export interface LoadPoint {
  /** Successful (2xx) responses per second. */
  rps: number;
  /** Mean latency by Little's law, `1000 · connections / rps` (the definition). */
  meanMs: number;
  /** Mean of the per-request times autocannon measured (sub-ms precision, for cross-checking `meanMs`). */
  sampleMeanMs: number;
  p50Ms: number;
  p99Ms: number;
  /** 2xx responses counted. */
  ok: number;
  /** Connection errors, timeouts and non-2xx answers: any of them makes the point suspect. */
  failures: number;
}

/**
 * Runs one autocannon load and measures every response's time at sub-ms precision from its
 * `response` events (its own histogram keeps whole milliseconds only).
 */
export async function runLoad(spec: LoadSpec): Promise<LoadPoint> {
  const times: number[] = [];
  const instance = autocannon({
    url: spec.urls.length === 1 ? spec.urls[0] : spec.urls,
    connections: spec.connections,
    duration: spec.durationS,
    pipelining: 1,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer bench', ...spec.headers },
    body: spec.body,
    timeout: 10,
  });
  instance.on('response', (_client, statusCode, _bytes, responseTime) => {
    if (statusCode >= 200 && statusCode < 300) times.push(responseTime);
  });
  const result = await instance;
  const rps = result['2xx'] / result.duration;
  return loadPoint(spec.connections, rps, times, result['2xx'], result.errors + result.timeouts + result.non2xx);
}

/**
 * A {@link LoadPoint} from what a run counted: `rps` (2xx per second), the answer times it sampled
 * (ms), its 2xx answers and its failures, over `connections` closed-loop connections.
 */
function loadPoint(connections: number, rps: number, times: number[], ok: number, failures: number): LoadPoint {
  return {
    rps,
    meanMs: littleMeanMs(connections, rps),
    sampleMeanMs: mean(times),
    p50Ms: percentile(times, 50),
    p99Ms: percentile(times, 99),
    ok,
    failures,
  };
}

/** A fixed number of requests instead of a fixed time (the Redis-cost scenario counts per request). */
export interface FixedLoadSpec extends Omit<LoadSpec, 'durationS'> {
  /** Requests to send in all. */
  amount: number;
  /**
   * Headers taken in turn on top of `headers`: the k-th request sent carries `rotatingHeaders[k % length]`
   * (e.g. the keys of several clients, so every load, c=1 included, is all of theirs). @defaultValue none
   */
  rotatingHeaders?: readonly Record<string, string>[];
}

/** What a fixed-amount load measured: `LoadPoint` and the wall time from the first request to the last answer. */
export interface FixedLoadPoint extends LoadPoint {
  seconds: number;
}

/**
 * Sends exactly `amount` requests over `connections` closed-loop keep-alive connections (connection i
 * to `urls[i % urls.length]`; request k with `rotatingHeaders[k % length]`) and resolves when the last one was answered. An undici loop rather than
 * autocannon: autocannon notices the end of an `amount` run only at its next 1 s tick, which would add
 * up to a second of idle time to a window that should hold the requests alone.
 */
export async function runFixedLoad(spec: FixedLoadSpec): Promise<FixedLoadPoint> {
  const agent = new Agent({ connections: spec.connections, pipelining: 1 });
  const headers = { 'content-type': 'application/json', authorization: 'Bearer bench', ...spec.headers };
  const times: number[] = [];
  let sent = 0;
  let failures = 0;
  const startedAt = performance.now();
  try {
    await Promise.all(
      Array.from({ length: Math.min(spec.connections, spec.amount) }, async (_, i) => {
        const url = spec.urls[i % spec.urls.length];
        const rotating = spec.rotatingHeaders ?? [];
        while (sent < spec.amount) {
          const own = rotating.length ? { ...headers, ...rotating[sent % rotating.length] } : headers;
          sent++;
          const t0 = performance.now();
          try {
            const res = await request(url, { method: 'POST', dispatcher: agent, headers: own, body: spec.body });
            await res.body.text();
            if (res.statusCode >= 200 && res.statusCode < 300) times.push(performance.now() - t0);
            else failures++;
          } catch {
            failures++;
          }
        }
      }),
    );
  } finally {
    await agent.close();
  }
  const seconds = (performance.now() - startedAt) / 1000;
  const rps = times.length / seconds;
  return { ...loadPoint(spec.connections, rps, times, times.length, failures), seconds };
}
