import type { UpstreamResponse } from '../adapters/adapter';
import type { ChunkFeed, StreamBody, StreamChunk } from '../adapters/chunk-feed';

/** A streamed upstream answer. */
type StreamedAnswer = Extract<UpstreamResponse, { kind: 'sse' }>;

/**
 * Passes a streamed upstream answer through unchanged, chunk by chunk, while `watch` sees each chunk
 * before the client does; `end` runs once when the stream is over, however it ends (done, failed,
 * or abandoned by the client). The base of the answer's watchers ({@link watchUsage},
 * {@link rememberResponseId}): a new one is a new wrapper, not a branch in the call. A body that
 * offers a feed (`StreamBody.feed`) keeps one, watched alike; a throw of `watch` fails the stream
 * with that error and closes the upstream, either way.
 */
export function watchChunks(
  upstream: StreamedAnswer,
  watch: (chunk: Uint8Array | string) => void,
  end?: () => void,
): StreamedAnswer {
  const source = upstream.body;
  // An iterator that calls `watch` as each chunk passes, not an async generator: a generator costs a
  // few promises and microtask turns per chunk, and every streamed chunk goes through each watcher.
  const feed = source.feed;
  const body: StreamBody = {
    ...(feed && { feed: () => watchedFeed(feed(), watch, end) }),
    [Symbol.asyncIterator]() {
      const chunks = source[Symbol.asyncIterator]();
      let ended = false;
      const finish = () => {
        if (ended) return;
        ended = true;
        end?.();
      };
      const stop = async () => {
        try {
          await chunks.return?.();
        } finally {
          finish();
        }
      };
      return {
        next: () =>
          chunks.next().then(
            (step) => {
              if (step.done) finish();
              else {
                try {
                  watch(step.value);
                } catch (err) {
                  return stop().then(() => Promise.reject(err));
                }
              }
              return step;
            },
            (err: unknown) => {
              finish();
              throw err;
            },
          ),
        return: async () => {
          await stop();
          return { done: true, value: undefined };
        },
      };
    },
  };
  return { ...upstream, body };
}

/** `inner` with `watch` called on each chunk before the sink gets it, and `end` once when it is over (see {@link watchChunks}). */
function watchedFeed(inner: ChunkFeed, watch: (chunk: StreamChunk) => void, end?: () => void): ChunkFeed {
  let ended = false;
  const finish = () => {
    if (ended) return;
    ended = true;
    end?.();
  };
  return {
    start: (sink) =>
      inner.start({
        // A throw here reaches the inner feed, which closes its source and ends with the error (`ChunkSink.chunk`).
        chunk: (chunk) => {
          watch(chunk);
          sink.chunk(chunk);
        },
        end: (error) => {
          finish();
          sink.end(error);
        },
      }),
    pause: () => inner.pause(),
    resume: () => inner.resume(),
    stop: () => {
      inner.stop();
      finish();
    },
  };
}
