import type { StatusSnapshot } from '@iop/status';
import { redactUrl } from '@iop/validate';

/** Options of {@link StatusPusher} (`status.push_url`, `status.interval_ms`, README "Configuration"). */
export interface StatusPusherOptions {
  /**
   * Where to POST the snapshot (JSON). A `user:password@` in it is sent as HTTP Basic auth (RFC 7617)
   * and never appears in a log line; neither does a query value (a token).
   */
  readonly url: string;
  /** Time between two pushes after a success, in ms (`status.interval_ms`). */
  readonly intervalMs: number;
  /**
   * Longest one POST may take, in ms; a slower receiver counts as a failure.
   * @defaultValue min(intervalMs, 10000)
   */
  readonly timeoutMs?: number;
  /**
   * Cap of the exponential backoff, in ms: after n consecutive failures the next push waits
   * `min(intervalMs * 2^n, maxBackoffMs)`.
   * @defaultValue max(intervalMs, 60000)
   */
  readonly maxBackoffMs?: number;
  /** Builds the snapshot to push. */
  readonly snapshot: () => Promise<StatusSnapshot>;
  /** Receives one warning per failed push. */
  readonly onError?: (error: Error, consecutiveFailures: number) => void;
  /**
   * Pushes only while `held` (a `PushLock`, so one exporter of the fleet pushes); a skipped push is
   * no failure. @defaultValue none: every push is sent
   */
  readonly lock?: { readonly held: boolean };
  /** Extra request headers, e.g. which exporter pushed. @defaultValue {} */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * Pushes the snapshot to a control plane (optional, `status.push_url`): POST every `intervalMs`,
 * each with a timeout; on failure (network error, timeout, non-2xx) exponential backoff, capped;
 * the next push is only scheduled once the previous one settled, so never more than one request
 * is in flight and slow receivers never pile requests up. With a `lock`, only the exporter that
 * holds it pushes. Redirects are not followed (a 3xx is a failure): the snapshot goes to the
 * configured host only. Errors name the URL redacted (`redactUrl`). `close()` stops the timer and
 * aborts the request in flight.
 */
export class StatusPusher {
  private readonly timeoutMs: number;
  private readonly maxBackoffMs: number;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private abort: AbortController | undefined;
  private closed = false;
  /** The URL without its userinfo, the `authorization` header that carries it, and the form logs show. */
  private readonly target: { url: string; headers: Record<string, string>; shown: string };
  /** Consecutive failed pushes (0 after a success). */
  consecutiveFailures = 0;

  constructor(private readonly options: StatusPusherOptions) {
    if (!/^https?:\/\//.test(options.url)) throw new Error('StatusPusher: url must be an http:// or https:// URL');
    if (!(options.intervalMs > 0)) throw new Error('StatusPusher: intervalMs must be a positive number of ms');
    this.timeoutMs = options.timeoutMs ?? Math.min(options.intervalMs, 10_000);
    this.maxBackoffMs = options.maxBackoffMs ?? Math.max(options.intervalMs, 60_000);
    if (!(this.timeoutMs > 0)) throw new Error('StatusPusher: timeoutMs must be a positive number of ms');
    if (!(this.maxBackoffMs >= options.intervalMs))
      throw new Error('StatusPusher: maxBackoffMs must be at least intervalMs');
    this.target = pushTarget(options.url);
  }

  /** Pushes once now, then keeps pushing until `close()`. */
  start(): void {
    if (this.closed || this.timer || this.inFlight) return;
    this.schedule(0);
  }

  /** Pushes at once (when this exporter just took the push lock) unless a push is running or the pusher is closed. */
  pushNow(): void {
    if (this.closed || this.inFlight || !this.timer) return;
    clearTimeout(this.timer);
    this.schedule(0);
  }

  /** The delay before the next push given the current failure run, in ms. */
  nextDelayMs(): number {
    if (this.consecutiveFailures === 0) return this.options.intervalMs;
    return Math.min(this.options.intervalMs * 2 ** this.consecutiveFailures, this.maxBackoffMs);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.abort?.abort();
    await this.inFlight;
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.inFlight = this.pushOnce().finally(() => {
        this.inFlight = undefined;
        if (!this.closed) this.schedule(this.nextDelayMs());
      });
    }, delayMs);
  }

  private async pushOnce(): Promise<void> {
    if (this.options.lock && !this.options.lock.held) return;
    const abort = new AbortController();
    this.abort = abort;
    const timeout = setTimeout(() => abort.abort(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    try {
      const body = JSON.stringify(await this.options.snapshot());
      const res = await fetch(this.target.url, {
        method: 'POST',
        headers: { ...this.options.headers, ...this.target.headers, 'content-type': 'application/json' },
        body,
        signal: abort.signal,
        redirect: 'manual',
      });
      await res.arrayBuffer().catch(() => undefined);
      if (res.status >= 300 && res.status < 400)
        throw new Error(`${this.target.shown} answered a redirect (${res.status}); redirects are not followed`);
      if (!res.ok) throw new Error(`${this.target.shown} answered ${res.status}`);
      this.consecutiveFailures = 0;
    } catch (err) {
      if (this.closed) return;
      this.consecutiveFailures++;
      const reason =
        abort.signal.aborted && abort.signal.reason instanceof Error ? abort.signal.reason : (err as Error);
      this.options.onError?.(reason, this.consecutiveFailures);
    } finally {
      clearTimeout(timeout);
      this.abort = undefined;
    }
  }
}

/** Splits a push URL's userinfo off into an HTTP Basic `authorization` header (RFC 7617). */
function pushTarget(url: string): { url: string; headers: Record<string, string>; shown: string } {
  const parsed = new URL(url);
  const headers: Record<string, string> = {};
  if (parsed.username !== '' || parsed.password !== '') {
    const user = decodeURIComponent(parsed.username);
    const password = decodeURIComponent(parsed.password);
    headers.authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
    parsed.username = '';
    parsed.password = '';
  }
  return { url: parsed.toString(), headers, shown: redactUrl(url) };
}
