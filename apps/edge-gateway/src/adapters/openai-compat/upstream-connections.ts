import { subscribe } from 'node:diagnostics_channel';
import { Agent, type Dispatcher } from 'undici';
import { trackUpstreamConnection } from '../upstream-answers';
import { halfClosingConnector } from './half-close';

/**
 * The connections of one HTTP adapter to its upstream (README "Adapters", "Connections to an
 * upstream"): a keep-alive pool, and the one retry that makes reusing its sockets safe.
 *
 * A server closes a keep-alive connection it finds idle (uvicorn, and so vLLM, after 5 s, without
 * a `Keep-Alive` hint); a request the gateway writes on that socket as the close crosses it is
 * never read: the gateway sees a reset or "other side closed" before any byte of an answer. So:
 * - idle sockets are closed after `keepAliveTimeoutMs` (`keep_alive_timeout_ms` of the adapter,
 *   below common servers' idle timeouts), and sooner when the server's `Keep-Alive: timeout=<s>`
 *   says so (undici honours the hint, less its 2 s margin: `keepAliveTimeoutThreshold`);
 * - a POST that fails that way on a reused socket, before any byte of an answer came back, is sent
 *   once more on a fresh connection, as browsers do (Chromium resends a request whose reused
 *   connection fails before the response headers). A fresh connection that fails is not retried.
 *   The retry is inside the adapter's call: the dispatcher keeps its lease, books nothing, and does
 *   not count it as a failover (README "Failover").
 *
 * A call the gateway cuts is closed by halves (`half-close.ts`): its lease waits for the server's
 * own close, at most `closeWaitMs` (`close_wait_ms` of the adapter).
 */
export class UpstreamConnections {
  /** Keep-alive sockets, each closed after `keepAliveTimeoutMs` idle (or sooner per the server's hint). */
  readonly pooled: Agent;
  /** One new connection per request (`pipelining: 0` sends `connection: close`): the retry's. */
  private readonly fresh: Agent;

  /**
   * `keepAliveTimeoutMs`: the longest a socket stays idle in the pool, in ms (≥ 1); `closeWaitMs`:
   * the longest a cut call's socket waits for the server to close its side, in ms.
   */
  constructor(keepAliveTimeoutMs: number, closeWaitMs: number) {
    const connect = halfClosingConnector(closeWaitMs);
    // No cap on connections: admission control is the provider queue's job, and a hidden cap here
    // would make requests wait uncounted (neither in_flight nor queued). Timeouts are the dispatcher's.
    this.pooled = new Agent({
      keepAliveTimeout: keepAliveTimeoutMs,
      // A server's hint may shorten the idle time, never lengthen it past the setting.
      keepAliveMaxTimeout: keepAliveTimeoutMs,
      headersTimeout: 0,
      bodyTimeout: 0,
      connect,
    });
    this.fresh = new Agent({ pipelining: 0, headersTimeout: 0, bodyTimeout: 0, connect });
    watchSockets();
  }

  /**
   * POSTs `body` through the pool; when that fails on a reused socket before any byte of an answer
   * (see the class), sends it once more on a fresh connection and calls `onResent` with the first
   * failure (for the log). The socket each attempt went out on is recorded for `opts.signal`
   * (`trackUpstreamConnection`), so that the call's end can wait for a cut socket's close.
   * @throws the failure of the last attempt, as undici raised it (the abort reason when `signal` fired)
   */
  async post(
    opts: { origin: string; path: string; headers: Record<string, string>; body: Buffer; signal: AbortSignal },
    onResent?: (firstFailure: unknown) => void,
  ): Promise<Dispatcher.ResponseData> {
    const request = { ...opts, method: 'POST' as const };
    sentOn.set(opts.body, undefined);
    try {
      return await this.pooled.request(request);
    } catch (err) {
      const sent = sentOn.get(opts.body);
      if (opts.signal.aborted || sent === undefined || !unanswered(sent) || !isDroppedConnection(err)) throw err;
      onResent?.(err);
      sentOn.set(opts.body, undefined);
      return await this.fresh.request(request);
    } finally {
      const sent = sentOn.get(opts.body);
      if (sent) trackUpstreamConnection(opts.signal, sent.socket);
      sentOn.delete(opts.body);
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.pooled.close(), this.fresh.close()]);
  }
}

/** Where a request went: whether its socket had carried a request before, and what the socket had read then. */
interface SentOn {
  reused: boolean;
  socket: { readonly bytesRead: number } & object;
  bytesReadAtSend: number;
}

/** Requests of {@link UpstreamConnections.post} being sent, by their body (undici keeps a Buffer body as is). */
const sentOn = new WeakMap<object, SentOn | undefined>();
/** Requests each socket has carried. */
const requestsOn = new WeakMap<object, number>();
let watching = false;

/**
 * Subscribes once per process to undici's `undici:client:sendHeaders` diagnostics channel (undici
 * docs, "Diagnostics Channel": published as a request's first byte is written, with the request
 * and its socket): counts each socket's requests and notes, for a request being posted, whether its
 * socket was reused and what it had read.
 */
function watchSockets(): void {
  if (watching) return;
  watching = true;
  subscribe('undici:client:sendHeaders', (message) => {
    const { request, socket } = message as { request?: { body?: unknown }; socket?: { bytesRead?: unknown } };
    if (typeof socket !== 'object' || socket === null || typeof socket.bytesRead !== 'number') return;
    const before = requestsOn.get(socket) ?? 0;
    requestsOn.set(socket, before + 1);
    const body = request?.body;
    if (typeof body === 'object' && body !== null && sentOn.has(body))
      sentOn.set(body, {
        reused: before > 0,
        socket: socket as SentOn['socket'],
        bytesReadAtSend: socket.bytesRead,
      });
  });
}

/** True when the request went out on a reused socket and nothing came back on it since. */
const unanswered = (sent: SentOn): boolean => sent.reused && sent.socket.bytesRead === sent.bytesReadAtSend;

/** The failures of a connection the server closed or reset: undici's `other side closed`, a reset, a broken pipe. */
function isDroppedConnection(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE';
}
