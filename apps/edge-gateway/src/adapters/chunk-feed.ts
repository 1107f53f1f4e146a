/** One chunk of a streamed answer: one or more whole SSE events, or an empty chunk (bytes moved inside the next event). */
export type StreamChunk = Uint8Array | string;

/** Where a {@link ChunkFeed} delivers. */
export interface ChunkSink {
  /** The next chunk, in order; called synchronously as it arrives. A throw ends the feed with that error. */
  chunk(chunk: StreamChunk): void;
  /** The stream is over: `error` undefined for a clean end, else why it failed. Called once, never after `stop`. */
  end(error?: unknown): void;
}

/**
 * A streamed answer's chunks pushed to one {@link ChunkSink} as they arrive: the relay's fast path,
 * with no promise or iterator step per chunk (tools/bench, scenario `relay`). The same chunks, errors
 * and end as the body's async iterator gives, for one reader: a body is read once, either way.
 */
export interface ChunkFeed {
  /** Starts delivery to `sink`; called once. */
  start(sink: ChunkSink): void;
  /** Holds further chunks back (the client's socket is full); the source's own flow control holds the rest. */
  pause(): void;
  /** Delivers again after {@link pause}. */
  resume(): void;
  /** The reader stopped early: the source is closed (the upstream call with it) and the sink hears nothing more. */
  stop(): void;
}

/**
 * The body of a streamed answer (`UpstreamResponse` of kind `sse`): an async iterable of chunks that
 * may also offer a {@link ChunkFeed} of the same chunks. A wrapper that changes the chunks drops the
 * feed unless it offers its own, so a feed never bypasses a wrapper.
 */
export type StreamBody = AsyncIterable<StreamChunk> & {
  /** A push reader of this body; absent when only the iterator is offered ({@link chunkFeed} then pumps it). */
  readonly feed?: () => ChunkFeed;
};

/**
 * A feed of `body`: its own when it offers one, else one that pumps its async iterator (one step at a
 * time, none while paused; `stop` returns the iterator, which closes the source as a `break` would).
 */
export function chunkFeed(body: StreamBody): ChunkFeed {
  return body.feed?.() ?? new IteratorFeed(body);
}

/** A {@link ChunkFeed} over an async iterable: what a body without a feed of its own costs the reader. */
class IteratorFeed implements ChunkFeed {
  private iterator?: AsyncIterator<StreamChunk>;
  private paused = false;
  private stopped = false;
  private wake?: () => void;

  constructor(private readonly body: AsyncIterable<StreamChunk>) {}

  start(sink: ChunkSink): void {
    this.iterator = this.body[Symbol.asyncIterator]();
    void this.pump(this.iterator, sink);
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    this.wake?.();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.wake?.();
    // Only ever called between steps (from the sink, or while paused): the iterator is not busy.
    void this.iterator?.return?.()?.catch(() => undefined);
  }

  private async pump(iterator: AsyncIterator<StreamChunk>, sink: ChunkSink): Promise<void> {
    try {
      for (;;) {
        while (this.paused && !this.stopped) await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        if (this.stopped) return;
        const step = await iterator.next();
        if (this.stopped) return;
        if (step.done) return sink.end();
        sink.chunk(step.value);
      }
    } catch (err) {
      if (this.stopped) return;
      // A throw of the sink's (a rejected step has ended the iterator already): closed as a `break` would.
      this.stopped = true;
      void iterator.return?.()?.catch(() => undefined);
      sink.end(err);
    }
  }
}
