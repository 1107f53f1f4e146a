import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate, createInflateRaw } from 'node:zlib';
import { upstreamError } from '../../errors';

/**
 * Decoding an upstream's `Content-Encoding` (RFC 9110, section 8.4), whether the gateway asked for
 * one or not (README "Connections to an upstream", and the table of errors an upstream causes in
 * README "Errors"): what the client gets is always the decoded bytes, under the gateway's own
 * `Content-Type` and a `Content-Length` of what it sends, never the upstream's `Content-Encoding`
 * or `Content-Length`.
 */

/** Most codings one answer may stack (`gzip, br`): more is refused, as curl and urllib3 do. */
export const MAX_CODINGS = 3;

/** The decoders of the codings the gateway reads; `identity` needs none. */
const DECODERS: Record<string, () => Transform> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: () => new DeflateDecoder(),
  br: createBrotliDecompress,
};

/**
 * The codings of a `Content-Encoding` header in the order they were applied, lower-cased, without
 * `identity` (RFC 9110, section 8.4: a list, repeated header lines joined by commas).
 * @throws UpstreamError 502 (counts against the provider, fails over) for a coding the gateway
 *   cannot decode (`zstd`, `compress`, an unknown token) or more than {@link MAX_CODINGS}.
 */
export function contentCodings(header: string | string[] | undefined, where: string): string[] {
  if (header === undefined) return [];
  const text = Array.isArray(header) ? header.join(',') : header;
  const codings = text
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  const unknown = codings.find((c) => !(c in DECODERS));
  if (unknown !== undefined || codings.length > MAX_CODINGS) {
    const what = unknown ?? `${codings.length} stacked codings`;
    throw upstreamError(
      `The upstream answered with a Content-Encoding the gateway cannot decode (${what.slice(0, 40)}); it decodes gzip, deflate and br.`,
      { detail: `${where}: content-encoding ${JSON.stringify(text).slice(0, 200)}` },
    );
  }
  return codings;
}

/**
 * `body` decoded from `codings` (as {@link contentCodings} returns them), as one stream: the last
 * coding applied is undone first. Decoding runs as the bytes arrive, at the pace the reader reads
 * (a stream stays a stream; a reader that stops, stops the decoding), so a reader that counts what
 * it reads bounds the decoded size, and destroying the returned stream destroys `body` (which
 * aborts the upstream call). An answer that cannot be decoded (corrupt, or cut short inside its
 * compressed data) makes the returned stream fail with zlib's error ({@link isDecodeError}).
 * `body` itself when there is nothing to decode.
 */
export function decodedBody(body: Readable, codings: readonly string[]): Readable {
  if (codings.length === 0) return body;
  const decoders = [...codings].reverse().map((c) => DECODERS[c]());
  // pipeline destroys every stage with the first error, so the reader of the last stage sees it.
  pipeline([body, ...decoders], () => undefined);
  return decoders[decoders.length - 1];
}

/**
 * True for what zlib raises on bytes it cannot decode: `Z_DATA_ERROR` (corrupt), `Z_BUF_ERROR`
 * (the compressed data ends early), brotli's `ERR__…` codes. Its `code` is safe to show a client.
 */
export function isDecodeError(err: unknown): boolean {
  const e = (typeof err === 'object' && err !== null ? err : {}) as { code?: unknown; errno?: unknown };
  return typeof e.code === 'string' && /^(Z_|ERR__|ERR_BROTLI)/.test(e.code) && typeof e.errno === 'number';
}

/**
 * `deflate` as servers send it: RFC 9110 names the zlib format (RFC 1950), some servers send raw
 * deflate (RFC 1951); the first byte tells them apart (a zlib header's low nibble is 8), as
 * browsers and undici's fetch do.
 */
class DeflateDecoder extends Transform {
  private inner?: Transform;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.inner === undefined) {
      if (chunk.length === 0) return callback();
      const inner = (chunk[0] & 0x0f) === 0x08 ? createInflate() : createInflateRaw();
      inner.on('data', (part: Buffer) => this.push(part));
      inner.on('error', (err) => this.destroy(err));
      this.inner = inner;
    }
    this.inner.write(chunk, callback);
  }

  override _flush(callback: TransformCallback): void {
    const inner = this.inner;
    if (inner === undefined) return callback();
    inner.once('end', () => callback());
    inner.end();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.inner?.destroy();
    callback(err);
  }
}
