import type { Response } from 'express';
import type { UpstreamResponse } from '../adapters/adapter';
import { ApiError, upstreamError } from '../errors';

const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};

/** Resolves when the socket can take more bytes; keeps memory flat for slow readers of long streams. */
function drained(res: Response): Promise<void> {
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
 * Writes an upstream answer to the client (DESIGN §6 streaming):
 * - `json`: status and body bytes as they came;
 * - `sse`: headers on the upstream's first chunk (so a failure before it is still a clean
 *   502/504), then every chunk written as it arrives — no buffering, no coalescing. A failure
 *   after the first byte ends the stream with an OpenAI error event and no `[DONE]`.
 * `onFirstByte` fires once, when the first upstream byte is in hand (it stops the
 * time-to-first-byte timer). Resolves when the response is finished or the client is gone.
 * @throws the adapter's error (an ApiError, or the abort reason) when it fails before the first byte.
 */
export async function sendUpstream(res: Response, upstream: UpstreamResponse, onFirstByte: () => void): Promise<void> {
  if (upstream.kind === 'json') {
    onFirstByte();
    res.status(upstream.status).type('application/json').end(upstream.body);
    return;
  }
  let started = false;
  try {
    for await (const chunk of upstream.body) {
      if (!started) {
        started = true;
        onFirstByte();
        res.writeHead(upstream.status, SSE_HEADERS);
      }
      if (res.destroyed) return;
      if (!res.write(chunk)) await drained(res);
    }
    if (!started) {
      onFirstByte();
      res.writeHead(upstream.status, SSE_HEADERS);
    }
    res.end();
  } catch (err) {
    if (!started) throw err;
    if (res.destroyed) return;
    const error = err instanceof ApiError ? err : upstreamError('The upstream stream failed before it finished.');
    res.end(`data: ${JSON.stringify(error.toBody())}\n\n`);
  }
}
