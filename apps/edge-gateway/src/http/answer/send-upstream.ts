import type { GatewayResponse } from '../gateway-handler';
import type { UpstreamResponse } from '../../adapters/adapter';
import { chunkFeed, type ChunkFeed, type ChunkSink, type StreamChunk } from '../../adapters/chunk-feed';
import type { Endpoint } from '../../adapters/request-fields';
import { ApiError, upstreamError, upstreamTimeout } from '../../errors';
import { kernelSendQueues } from './kernel-send-queue';
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
  /**
   * Bytes the kernel still holds to send to the client (`KernelSendQueues.of`), or undefined when not
   * known; a shrink counts as the client moving (see `IdleWatch`). @defaultValue the process's
   * `kernelSendQueues` (tests give readings of their own)
   */
  clientQueue?: (socket: GatewayResponse['socket']) => Promise<number | undefined>;
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
 * The chunks are pushed to the client's socket as they arrive (`chunkFeed`: the body's own feed when
 * it offers one, else its iterator pumped), with no promise per chunk.
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
  const feed = chunkFeed(upstream.body);
  return new Promise<SendResult>((resolve, reject) =>
    new StreamRelay(res, upstream.status, feed, opts, resolve, reject).start(),
  );
}

/** One stream's relay from its feed to the client's socket (see {@link sendUpstream}). */
class StreamRelay implements ChunkSink {
  private readonly tail: StreamTail;
  private readonly idle: IdleWatch;
  private started = false;
  private over = false;
  /** Waiting for the client's socket to drain (the feed is paused). */
  private waiting = false;

  constructor(
    private readonly res: GatewayResponse,
    /** The upstream's status, the client's once the first chunk (or the end) comes. */
    private readonly status: number,
    private readonly feed: ChunkFeed,
    private readonly opts: SendOptions,
    private readonly resolve: (result: SendResult) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    this.tail = new StreamTail(opts.endpoint);
    this.idle = new IdleWatch(
      opts.idleTimeoutMs,
      (side) => {
        if (side === 'client') {
          opts.abortUpstream(new ClientStalledError(opts.idleTimeoutMs));
          res.destroy();
        } else {
          opts.abortUpstream(upstreamTimeout({ wait: 'stream_idle', ms: opts.idleTimeoutMs }));
        }
      },
      () => (opts.clientQueue ?? defaultClientQueue)(res.socket),
    );
  }

  start(): void {
    this.feed.start(this);
  }

  chunk(chunk: StreamChunk): void {
    if (this.over) return;
    try {
      this.write(chunk);
    } catch (err) {
      // The relay's own failure (a write to a socket in a bad state): as a failed read would end it.
      this.feed.stop();
      this.end(err);
    }
  }

  end(error?: unknown): void {
    if (this.over) return;
    if (error !== undefined) {
      if (!this.started) {
        this.over = true;
        this.stopWaiting();
        this.idle.stop();
        return this.reject(error);
      }
      return this.finish(error);
    }
    if (!this.started) {
      this.opts.onFirstByte();
      this.res.writeHead(this.status, SSE_HEADERS);
    }
    const failure =
      !this.res.destroyed && !this.tail.finished()
        ? upstreamError('The upstream stream ended before it finished (its end-of-stream marker never came).', {
            detail: 'stream ended without data: [DONE]',
          })
        : undefined;
    this.finish(failure);
  }

  private write(chunk: StreamChunk): void {
    const { res, idle } = this;
    // Bytes that arrived inside an event not finished yet: they moved, and nothing is written.
    if (chunk.length === 0) return idle.moved('upstream');
    if (!this.started) {
      this.started = true;
      this.opts.onFirstByte();
      res.writeHead(this.status, SSE_HEADERS);
      idle.start();
    }
    idle.moved('upstream');
    if (res.destroyed) {
      this.feed.stop();
      return this.finish(undefined);
    }
    this.tail.observe(chunk);
    // A chunk can still come while waiting (the last one a feed gives at its end): one wait is enough.
    if (!res.write(chunk) && !this.waiting) {
      idle.moved('client');
      this.waiting = true;
      this.feed.pause();
      res.on('drain', this.drained);
      res.on('close', this.drained);
    }
  }

  /** The socket can take more bytes, or the client is gone. */
  private readonly drained = (): void => {
    this.stopWaiting();
    if (this.res.destroyed) {
      this.feed.stop();
      return this.finish(undefined);
    }
    this.idle.moved('upstream');
    this.feed.resume();
  };

  private stopWaiting(): void {
    if (!this.waiting) return;
    this.waiting = false;
    this.res.off('drain', this.drained);
    this.res.off('close', this.drained);
  }

  /** Ends the answer once: cleanly, with `failure`'s error event, or not at all when the client is gone. */
  private finish(failure: unknown): void {
    if (this.over) return;
    this.over = true;
    this.stopWaiting();
    const { res, idle, tail } = this;
    idle.stop();
    if (idle.fired === 'client') return this.resolve({ outcome: 'client_stalled' });
    if (res.destroyed) return this.resolve({ outcome: 'client_gone' });
    if (failure === undefined) {
      res.end(tail.closing());
      return this.resolve(SENT);
    }
    const shown = this.opts.clientError(failure);
    const error = shown instanceof ApiError ? shown : upstreamError('The upstream stream failed before it finished.');
    // An upstream that ended its stream with its own error event has told the client already.
    res.end(tail.closing() + (tail.endedWithError() ? '' : tail.errorEvents(error)));
    this.resolve({ outcome: 'upstream_failed', error: failure });
  }
}

const defaultClientQueue = (socket: GatewayResponse['socket']) => kernelSendQueues.of(socket);

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
 *
 * A client counts as moving while the kernel's send queue to it shrinks, even with no `drain`
 * (`clientQueue`: `kernelSendQueues`): the watch looks every quarter of `ms`; at each look that
 * finds the client quiet for a quarter of `ms` or more, that queue is sampled, and a sample below the
 * one before counts as a move at the time it is taken. So a client that reads in bursts at least
 * every half of `ms` is not cut, and one that reads nothing is cut at `ms` as before
 * (docs/architecture.md, "HTTP surface").
 */
class IdleWatch {
  private lastMove = 0;
  private waitingOn: 'upstream' | 'client' = 'upstream';
  private timer?: NodeJS.Timeout;
  private stopped = false;
  /** The kernel's send queue at the last sample while waiting on the client (bytes), reset by any move. */
  private lastQueued?: number;
  /** Sampling interval while waiting on the client, ms. */
  private readonly sampleMs: number;
  fired?: 'upstream' | 'client';

  constructor(
    private readonly ms: number,
    private readonly onIdle: (side: 'upstream' | 'client') => void,
    private readonly clientQueue: () => Promise<number | undefined>,
  ) {
    this.sampleMs = Math.max(1, Math.floor(ms / 4));
  }

  start(): void {
    this.lastMove = performance.now();
    this.arm(this.sampleMs);
  }

  moved(waitingOn: 'upstream' | 'client'): void {
    this.lastMove = performance.now();
    this.waitingOn = waitingOn;
    this.lastQueued = undefined;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(delay: number): void {
    this.timer = setTimeout(() => this.check(), Math.max(1, delay));
  }

  private check(): void {
    this.timer = undefined;
    const quiet = performance.now() - this.lastMove;
    if (this.waitingOn === 'client' && quiet >= this.sampleMs) return void this.sample();
    if (quiet >= this.ms) return this.fire();
    // The watch looks every quarter of `ms`, so that a client's first sample is taken early in its
    // quiet time.
    this.arm(Math.min(this.sampleMs, this.ms - quiet));
  }

  /** Samples the client's kernel queue, counts a shrink as a move, then re-arms or fires. */
  private async sample(): Promise<void> {
    const queued = await this.clientQueue().catch(() => undefined);
    if (this.stopped) return;
    // A drain or a chunk during the read moved the stream on: go on from there.
    if (this.waitingOn !== 'client') return this.check();
    if (queued !== undefined && this.lastQueued !== undefined && queued < this.lastQueued) {
      this.lastMove = performance.now();
    }
    this.lastQueued = queued;
    const quiet = performance.now() - this.lastMove;
    if (quiet >= this.ms) return this.fire();
    this.arm(Math.min(this.sampleMs, this.ms - quiet));
  }

  private fire(): void {
    this.fired = this.waitingOn;
    this.onIdle(this.waitingOn);
  }
}
