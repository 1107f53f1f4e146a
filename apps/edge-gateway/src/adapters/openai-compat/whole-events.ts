import type { Readable } from 'node:stream';
import type { ChunkFeed, ChunkSink, StreamBody } from '../chunk-feed';
import { UpstreamError, upstreamError } from '../../errors';
import { inBandError } from '../responses-translation/chat-stream-to-responses-stream';
import { SseFramer } from './sse-framer';
import {
  blankLineAfter,
  END_MARKER,
  ERROR_HINTS,
  holdsAny,
  parseEvents,
  prematureClose,
  streamFailure,
  upstreamErrorEvent,
  type StreamEndpoint,
} from './stream-ends';
import { tooLarge } from './upstream-errors';

export type { StreamEndpoint } from './stream-ends';

/** What {@link wholeEvents} needs to know of the call. */
export interface WholeEventsOptions {
  endpoint: StreamEndpoint;
  /** The call's signal: when it fired, its reason is the stream's error. */
  signal: AbortSignal;
  /** Where the stream comes from, for the log only (`POST <redacted base_url>/chat/completions`). */
  where: string;
  /** Most bytes one unfinished event may hold (`gateway.max_response_bytes`); more is a 502, not booked. */
  maxEventBytes: number;
  /**
   * Makes an upstream's text fit for a client (`UpstreamTarget.redactForClient`: no secret the gateway
   * sent, no upstream address), applied to every chunk that may hold an error event before it is
   * passed on or read as the stream's error. @defaultValue none
   */
  redact?: (text: string) => string;
}

const NO_BYTES = Buffer.alloc(0);

/**
 * An upstream's SSE answer as whole events only (README "Streaming"): each chunk yielded is one or
 * more whole events, bytes as the upstream sent them ({@link SseFramer}); an event is held until its
 * blank line arrives, and once the stream has yielded an event an empty chunk marks bytes that
 * arrived inside the next one (so idle timers see them move). How the stream may end, whatever its
 * framing (chunked, close-delimited, `Content-Length`):
 * - after its end marker (chat `data: [DONE]`; Responses `response.completed` or
 *   `response.incomplete`): finished; a read error, an abort of the call (the stream idle timeout
 *   of an upstream that never ends its stream) or an unfinished event after it changes nothing;
 * - with the end marker itself cut short by the close or a read error (`data: [DONE]` with no
 *   blank line, as some servers send it): finished, the marker's blank line added;
 * - in the middle of any other event: that half event is dropped (a client never sees it) and
 *   the stream fails with a 502;
 * - after the upstream's own error event (chat `{"error": …}`, Responses `error` or
 *   `response.failed`): fails with that error ({@link inBandError}: a 4xx about the request is not
 *   the provider's fault);
 * - otherwise (no end marker): fails with a 502.
 * `body` is read only once the iteration (or the feed) starts, and no further than the reader takes:
 * one framed chunk ahead at most, the rest held back by the body's own flow control. The feed
 * (`StreamBody.feed`) hands each framed chunk to its sink in the body's own `data` event.
 * @throws (from the iteration) UpstreamError 502 as above, when a read fails (reset, body cut
 *   short, undecodable `Content-Encoding`), or (not booked) when one event passes `maxEventBytes`;
 *   the signal's reason when it fired. Stopping the iteration early closes `body`.
 */
export function wholeEvents(body: Readable, opts: WholeEventsOptions): StreamBody {
  return {
    [Symbol.asyncIterator]: () => new WholeEventReader(body, opts),
    feed: () => new WholeEventReader(body, opts),
  };
}

/** How a {@link WholeEventReader} ends once its framed chunks are taken: a last chunk, an error, or neither. */
interface StreamEnd {
  chunk?: Uint8Array;
  error?: unknown;
}

/**
 * The iterator and the feed of {@link wholeEvents}. It frames each chunk as the body emits it
 * (`data` events) and hands it straight to the sink of a started feed (no promise: the relay's hot
 * path, tools/bench scenario `relay`), or to a waiting `next()` (one promise per chunk, where an async
 * generator over the body's own async iterator costs a `readable` event, a `read()` and two more).
 */
class WholeEventReader implements AsyncIterator<Uint8Array, undefined>, ChunkFeed {
  private readonly framer = new SseFramer();
  private readonly marker: (typeof END_MARKER)[StreamEndpoint];
  /** The end marker has passed. */
  private finished = false;
  /** The last chunk of whole events: its last event tells why a stream without its end marker stopped. */
  private last?: Buffer;
  /** Framed chunks the reader has not taken yet (the body is paused while any wait). */
  private readonly ready: Uint8Array[] = [];
  /** Set once the body is over (or the reader stopped): what the reader gets after `ready`. */
  private end?: StreamEnd;
  private waiter?: { resolve: (step: IteratorResult<Uint8Array, undefined>) => void; reject: (err: unknown) => void };
  private started = false;
  /** The sink of a started feed (cleared once it has its end, or the feed stopped). */
  private sink?: ChunkSink;

  constructor(
    private readonly body: Readable,
    private readonly opts: WholeEventsOptions,
  ) {
    this.marker = END_MARKER[opts.endpoint];
  }

  next(): Promise<IteratorResult<Uint8Array, undefined>> {
    const value = this.ready.shift();
    if (value !== undefined) {
      if (this.ready.length === 0 && this.end === undefined) this.body.resume();
      return Promise.resolve({ done: false, value });
    }
    if (this.end !== undefined) return this.takeEnd();
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
      if (!this.started) this.listen();
    });
  }

  /** Feeds `sink` (`ChunkFeed.start`): each framed chunk as the body emits it, then the end as {@link next} would give it. */
  start(sink: ChunkSink): void {
    this.sink = sink;
    this.listen();
  }

  pause(): void {
    if (this.end === undefined) this.body.pause();
  }

  resume(): void {
    if (this.end === undefined) this.body.resume();
  }

  /** The feed's reader stopped early: as {@link return}, and the sink hears nothing more. */
  stop(): void {
    this.sink = undefined;
    void this.return();
  }

  /** The reader stopped early: the body is closed (the upstream call with it). */
  return(): Promise<IteratorResult<Uint8Array, undefined>> {
    this.ready.length = 0;
    if (this.end === undefined) this.body.destroy();
    this.end = {};
    return Promise.resolve({ done: true, value: undefined });
  }

  private listen(): void {
    this.started = true;
    const body = this.body;
    body.on('data', this.onData);
    body.on('end', this.onEnd);
    body.on('error', this.onError);
    body.on('close', this.onClose);
    if (body.readableEnded) this.onEnd();
    else if (body.destroyed) this.onError(body.errored ?? prematureClose());
  }

  private readonly onData = (chunk: Buffer): void => {
    if (this.end !== undefined) return;
    const opts = this.opts;
    const pushed = this.framer.push(chunk);
    const whole =
      pushed !== undefined && opts.redact && holdsAny(pushed, ERROR_HINTS)
        ? Buffer.from(opts.redact(pushed.toString('utf8')))
        : pushed;
    if (this.framer.heldBytes > opts.maxEventBytes) {
      const err = tooLarge(opts.maxEventBytes, opts.where, `one stream event over ${opts.maxEventBytes} bytes`);
      this.settle({ error: opts.signal.aborted ? (opts.signal.reason ?? err) : err });
      this.body.destroy();
      return;
    }
    if (whole !== undefined) {
      if (!this.finished && holdsAny(whole, this.marker.hints))
        this.finished = parseEvents(whole).some(this.marker.isEnd);
      this.last = whole;
      this.deliver(whole);
    } else if (this.last !== undefined) this.deliver(NO_BYTES);
  };

  private readonly onEnd = (): void => {
    if (this.end === undefined) this.settle(this.endOf(undefined));
  };

  private readonly onError = (err: unknown): void => {
    if (this.end !== undefined) return;
    // After the end marker nothing the client needs is lost, whatever stopped the body: a read error,
    // or the call aborted (an upstream that keeps its stream open meets the stream idle timeout).
    if (this.finished) return this.settle({});
    const signal = this.opts.signal;
    if (signal.aborted) this.settle({ error: signal.reason ?? err });
    else if (err instanceof UpstreamError) this.settle({ error: err });
    else this.settle(this.endOf(err));
  };

  /** Closed with neither its end nor an error (destroyed): a read that failed. */
  private readonly onClose = (): void => {
    if (this.end === undefined && !this.body.readableEnded) this.onError(this.body.errored ?? prematureClose());
  };

  private deliver(chunk: Uint8Array): void {
    const sink = this.sink;
    if (sink !== undefined) {
      try {
        sink.chunk(chunk);
      } catch (err) {
        // The sink's throw ends the feed with it (`ChunkSink.chunk`): the body is closed as `return` closes it.
        this.sink = undefined;
        void this.return();
        sink.end(err);
      }
      return;
    }
    const waiter = this.waiter;
    if (waiter !== undefined) {
      this.waiter = undefined;
      waiter.resolve({ done: false, value: chunk });
    } else {
      this.ready.push(chunk);
      this.body.pause();
    }
  }

  private settle(end: StreamEnd): void {
    this.end = end;
    const sink = this.sink;
    if (sink !== undefined) {
      this.sink = undefined;
      if (end.chunk !== undefined) {
        try {
          sink.chunk(end.chunk);
        } catch (err) {
          return sink.end(err);
        }
      }
      return sink.end(end.error);
    }
    const waiter = this.waiter;
    if (waiter === undefined || this.ready.length > 0) return;
    this.waiter = undefined;
    this.takeEnd().then(waiter.resolve, waiter.reject);
  }

  /** What the reader gets once every framed chunk is taken: the last chunk, then the error or the end. */
  private takeEnd(): Promise<IteratorResult<Uint8Array, undefined>> {
    const end = this.end as StreamEnd;
    if (end.chunk !== undefined) {
      const value = end.chunk;
      end.chunk = undefined;
      return Promise.resolve({ done: false, value });
    }
    if (end.error !== undefined) {
      const error = end.error;
      end.error = undefined;
      return Promise.reject(error);
    }
    return Promise.resolve({ done: true, value: undefined });
  }

  /** How the stream ends when the body is over, `failure` being the read's error if any (see {@link wholeEvents}). */
  private endOf(failure: unknown): StreamEnd {
    // After the end marker, a read error or an unfinished event loses nothing the client needs.
    if (this.finished) return {};
    const rest = this.framer.rest();
    const where = this.opts.where;
    if (rest.length > 0) {
      const cut = parseEvents(Buffer.concat([rest, Buffer.from('\n\n')]));
      if (cut.length === 1 && this.marker.isEnd(cut[0]))
        return { chunk: Buffer.concat([rest, Buffer.from(blankLineAfter(rest))]) };
    }
    if (failure !== undefined) return { error: streamFailure(failure, where) };
    if (rest.length > 0)
      return {
        error: upstreamError(
          'The upstream stream ended in the middle of an event (the unfinished event was dropped).',
          {
            detail: `${where}: stream ended mid-event, ${rest.length} bytes of an unfinished event dropped`,
          },
        ),
      };
    const lastEvent = this.last === undefined ? undefined : parseEvents(this.last).at(-1);
    const reported = lastEvent === undefined ? undefined : upstreamErrorEvent(lastEvent);
    if (reported !== undefined) return { error: inBandError(reported) };
    return {
      error: upstreamError('The upstream stream ended before it finished (its end-of-stream marker never came).', {
        detail: `${where}: stream ended without ${this.marker.name}`,
      }),
    };
  }
}
