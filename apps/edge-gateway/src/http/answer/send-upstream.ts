import type { GatewayResponse } from '../gateway-handler';
import type { UpstreamResponse } from '../../adapters/adapter';
import type { Endpoint } from '../../adapters/request-fields';
import { ApiError, upstreamError, upstreamTimeout } from '../../errors';
import { StreamTail } from './stream-tail';

/** The content type of a JSON answer, as express's `res.type('application/json')` writes it. */
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/** How {@link sendUpstream} writes one answer. */
export interface SendOptions {
  /** The endpoint the client called: picks the shape of a mid-stream error (chat vs Responses events). */
  endpoint: Endpoint;
  /** Fires once, when the first upstream byte is in hand (it stops the time-to-first-byte timer). */
  onFirstByte(): void;
  /** `gateway.stream_idle_timeout_ms`: the longest a stream may go with no byte moving either way. */
  idleTimeoutMs: number;
  /** Stops the upstream call (aborts its request, kills a CLI program). */
  abortUpstream(reason: unknown): void;
  /** The error as the client may see it (no URL, host or stderr: `toClientError`). */
  clientError(err: unknown): unknown;
}

/** How a stream ended, for the dispatcher to book and log. */
export type SendResult =
  | { outcome: 'done' }
  /** The upstream failed mid-stream (reset, in-band error, silent past the idle timeout, no `[DONE]`); the client got the error event. */
  | { outcome: 'upstream_failed'; error: unknown }
  /** The client accepted no byte for `idleTimeoutMs`: the connection was cut and the upstream aborted. */
  | { outcome: 'client_stalled' }
  /** The client went away. */
  | { outcome: 'client_gone' };

/** The client accepted no byte for the idle timeout (README "Streaming"); never booked against a provider. */
export class ClientStalledError extends ApiError {
  constructor(ms: number) {
    super({
      status: 499,
      code: 'client_stalled',
      type: 'invalid_request_error',
      message: `The client accepted no byte for ${ms} ms (gateway.stream_idle_timeout_ms).`,
    });
  }
}

/** Resolves when the socket can take more bytes, or the client is gone. */
function drained(res: GatewayResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/**
 * Writes an upstream answer to the client (README "Streaming"):
 * - `json`: status and body bytes as they came;
 * - `sse`: headers on the upstream's first chunk (so a failure before it is still a clean
 *   502/504), then every chunk written as it arrives: no buffering, no coalescing, and no more read
 *   from the upstream than the client accepts (a slow reader holds the upstream back, memory stays flat).
 *
 * A stream where no byte moves for `idleTimeoutMs` is cut: waiting on the upstream, it is aborted
 * and the client gets the error event; waiting on a client that reads nothing, the connection is
 * closed and the upstream aborted. Either way the caller releases the lease at once.
 * A failure after the first byte ends the stream with an error event and never a clean end: for
 * chat, `data: {"error": …}`; for Responses, `response.failed` (when the stream named its response)
 * and `error`, numbered on from the stream's last `sequence_number`. A chat stream that ends
 * without `data: [DONE]` is a failure too. An event cut short by the end of the stream (`data:
 * [DONE]` with no blank line after it) gets its blank line.
 * @returns how the stream ended; throws only before the first byte.
 * @throws the adapter's error (an ApiError, or the abort reason) when it fails before the first byte.
 */
export async function sendUpstream(
  res: GatewayResponse,
  upstream: UpstreamResponse,
  opts: SendOptions,
): Promise<SendResult> {
  if (upstream.kind === 'json') {
    opts.onFirstByte();
    return sendJson(res, upstream);
  }
  const tail = new StreamTail(opts.endpoint);
  const idle = new IdleWatch(opts.idleTimeoutMs, (side) => {
    if (side === 'client') {
      opts.abortUpstream(new ClientStalledError(opts.idleTimeoutMs));
      res.destroy();
    } else {
      opts.abortUpstream(upstreamTimeout({ wait: 'stream_idle', ms: opts.idleTimeoutMs }));
    }
  });
  let started = false;
  let failure: unknown;
  try {
    for await (const chunk of upstream.body) {
      // Bytes that arrived inside an event not finished yet: they moved, and nothing is written.
      if (chunk.length === 0) {
        idle.moved('upstream');
        continue;
      }
      if (!started) {
        started = true;
        opts.onFirstByte();
        res.writeHead(upstream.status, SSE_HEADERS);
        idle.start();
      }
      idle.moved('upstream');
      if (res.destroyed) break;
      tail.observe(chunk);
      if (!res.write(chunk)) {
        idle.moved('client');
        await drained(res);
        if (res.destroyed) break;
        idle.moved('upstream');
      }
    }
    if (!started) {
      opts.onFirstByte();
      res.writeHead(upstream.status, SSE_HEADERS);
    }
    if (!res.destroyed && !tail.finished()) {
      failure = upstreamError('The upstream stream ended before it finished (its end-of-stream marker never came).', {
        detail: 'stream ended without data: [DONE]',
      });
    }
  } catch (err) {
    if (!started) throw err;
    failure = err;
  } finally {
    idle.stop();
  }
  if (idle.fired === 'client') return { outcome: 'client_stalled' };
  if (res.destroyed) return { outcome: 'client_gone' };
  if (failure === undefined) {
    res.end(tail.closing());
    return { outcome: 'done' };
  }
  const shown = opts.clientError(failure);
  const error = shown instanceof ApiError ? shown : upstreamError('The upstream stream failed before it finished.');
  // An upstream that ended its stream with its own error event has told the client already.
  res.end(tail.closing() + (tail.endedWithError() ? '' : tail.errorEvents(error)));
  return { outcome: 'upstream_failed', error: failure };
}

/** A finished answer (shared: callers only read it). */
export const SENT: SendResult = Object.freeze({ outcome: 'done' });

/**
 * Writes a non-streamed upstream answer: its status and body bytes as they came, as JSON. No
 * promise and no stream bookkeeping: the hot path of a non-streamed completion (tools/bench).
 */
export function sendJson(res: GatewayResponse, upstream: Extract<UpstreamResponse, { kind: 'json' }>): SendResult {
  // What `res.status().type('application/json')` sets, without express's mime lookup per request.
  res.statusCode = upstream.status;
  res.setHeader('Content-Type', JSON_CONTENT_TYPE);
  res.end(upstream.body);
  return SENT;
}

/**
 * One timer per stream, re-armed lazily: each chunk only records the time (no timer work per chunk).
 * When `ms` pass with no byte moving, `onIdle` is told which side stalled: the upstream (the stream
 * waits for its next chunk) or the client (the stream waits for the socket to drain).
 */
class IdleWatch {
  private lastMove = 0;
  private waitingOn: 'upstream' | 'client' = 'upstream';
  private timer?: NodeJS.Timeout;
  fired?: 'upstream' | 'client';

  constructor(
    private readonly ms: number,
    private readonly onIdle: (side: 'upstream' | 'client') => void,
  ) {}

  start(): void {
    this.lastMove = performance.now();
    this.arm(this.ms);
  }

  moved(waitingOn: 'upstream' | 'client'): void {
    this.lastMove = performance.now();
    this.waitingOn = waitingOn;
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(delay: number): void {
    this.timer = setTimeout(() => this.check(), Math.max(1, delay));
  }

  private check(): void {
    const quiet = performance.now() - this.lastMove;
    if (quiet < this.ms) return this.arm(this.ms - quiet);
    this.timer = undefined;
    this.fired = this.waitingOn;
    this.onIdle(this.waitingOn);
  }
}
