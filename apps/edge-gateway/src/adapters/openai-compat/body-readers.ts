import type { Readable } from 'node:stream';
import { tooLarge } from './upstream-errors';

/**
 * How the adapter reads an upstream's answer body (already decoded from its `Content-Encoding`,
 * `content-decoding.ts`): whole and capped, or a capped error text. Streams: `whole-events.ts`.
 */

/**
 * The whole body, at most `limit` bytes (decoded bytes, when it was encoded: a compression bomb stops
 * at the limit). @throws UpstreamError 502 (not booked) past `limit`; the body stream's error on a
 * reset, a body shorter than its `content-length` or one that cannot be decoded.
 */
export function readBytes(body: Readable, limit: number, where: string): Promise<Uint8Array> {
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
    // Plain listeners, no once-wrappers per answer: 'end' and 'close' come once, and a promise settles once.
    body.on('data', onData);
    body.on('error', reject);
    let ended = false;
    body.on('end', () => {
      ended = true;
      resolve(parts.length === 1 ? parts[0] : Buffer.concat(parts, size));
    });
    // Closed without an end or an error: cut short, as an iterator would report it.
    body.on('close', () => {
      if (!ended) reject(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    });
  });
}

/** At most `limit` bytes of `body` as text; the rest is discarded and the body closed. */
export async function readCapped(body: Readable, limit: number, signal: AbortSignal): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of body as AsyncIterable<Buffer>) {
    if (signal.aborted) break;
    parts.push(part);
    size += part.length;
    if (size >= limit) break;
  }
  discard(body);
  return Buffer.concat(parts).subarray(0, limit).toString('utf8');
}

/**
 * Stops reading `body` and frees its connection. undici's body fails with "Request aborted" when
 * destroyed before its end; nobody reads it any more, so that error is dropped here.
 */
export function discard(body: Readable): void {
  body.on('error', () => undefined);
  body.destroy();
}
