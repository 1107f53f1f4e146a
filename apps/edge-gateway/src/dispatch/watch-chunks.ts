import type { UpstreamResponse } from '../adapters/adapter';

/** A streamed upstream answer. */
type StreamedAnswer = Extract<UpstreamResponse, { kind: 'sse' }>;

/**
 * Passes a streamed upstream answer through unchanged, chunk by chunk, while `watch` sees each chunk
 * before the client does; `end` runs once when the stream is over, however it ends (done, failed,
 * or abandoned by the client). The base of the answer's watchers ({@link watchUsage},
 * {@link rememberResponseId}): a new one is a new wrapper, not a branch in the call.
 */
export function watchChunks(
  upstream: StreamedAnswer,
  watch: (chunk: Uint8Array | string) => void,
  end?: () => void,
): StreamedAnswer {
  const source = upstream.body;
  // An iterator that calls `watch` as each chunk passes, not an async generator: a generator costs a
  // few promises and microtask turns per chunk, and every streamed chunk goes through each watcher.
  const body: AsyncIterable<Uint8Array | string> = {
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
