import type { Dispatcher } from 'undici';
import { upstreamError } from '../../errors';
import { clientSafeCode, messageOf, tooLarge } from './upstream-errors';

/** How the adapter reads an upstream's answer body: whole and capped, a capped error text, or as a stream. */

/**
 * The whole body, at most `limit` bytes. @throws UpstreamError 502 (not booked) past `limit`, the
 * body stream's error on a reset or a body shorter than its `content-length`.
 */
export function readBytes(body: Dispatcher.ResponseData['body'], limit: number, where: string): Promise<Uint8Array> {
  // Plain 'data'/'end' listeners: an async iterator costs a promise per chunk on the hot path (tools/bench).
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    const onData = (part: Buffer) => {
      size += part.length;
      if (size > limit) {
        body.off('data', onData);
        body.destroy();
        reject(tooLarge(limit, where, `more than ${limit} bytes`));
        return;
      }
      parts.push(part);
    };
    body.on('data', onData);
    body.once('error', reject);
    let ended = false;
    body.once('end', () => {
      ended = true;
      resolve(parts.length === 1 ? parts[0] : Buffer.concat(parts, size));
    });
    // Closed without an end or an error: cut short, as an iterator would report it.
    body.once('close', () => {
      if (!ended) reject(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    });
  });
}

/** At most `limit` bytes of `body` as text; the rest is discarded and the body closed. */
export async function readCapped(
  body: Dispatcher.ResponseData['body'],
  limit: number,
  signal: AbortSignal,
): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of body as AsyncIterable<Buffer>) {
    if (signal.aborted) break;
    parts.push(part);
    size += part.length;
    if (size >= limit) break;
  }
  body.destroy();
  return Buffer.concat(parts).subarray(0, limit).toString('utf8');
}

/**
 * The upstream's SSE body, chunks passed on as they come; a read that fails (reset, socket closed)
 * becomes an UpstreamError 502, or the abort reason when `signal` fired. Stopping early closes the body.
 */
export async function* upstreamStream(
  body: AsyncIterable<Uint8Array>,
  signal: AbortSignal,
  where: string,
): AsyncGenerator<Uint8Array, void, undefined> {
  try {
    yield* body;
  } catch (err) {
    if (signal.aborted) throw signal.reason ?? err;
    const why = clientSafeCode(err);
    throw upstreamError(`The upstream stream failed before it finished (${why}).`, {
      detail: `${where}: stream failed: ${messageOf(err)}`,
    });
  }
}
