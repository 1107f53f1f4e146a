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
  return {
    ...upstream,
    body: (async function* () {
      try {
        for await (const chunk of source) {
          watch(chunk);
          yield chunk;
        }
      } finally {
        end?.();
      }
    })(),
  };
}
