import type { GatewaySettings } from '@iop/validate';
import type { IncomingMessage } from 'node:http';
import type { Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { ApiError, clientClosed, echoed, invalidRequest, requestTooLarge, tooManyValues } from '../../errors';
import { JsonValueCounter } from './json-values';
import { onePerTurn } from './parse-queue';
import type { GatewayHandler } from '../gateway-handler';

/**
 * A body of at most this many decoded bytes and {@link SMALL_BODY_VALUES} values is parsed at once;
 * a larger one waits for its turn ({@link onePerTurn}). Below both it costs under ~1 ms to parse
 * and check even on a loaded host (~100 ns a value, ~1 GB/s of text), so a normal request gets no
 * extra turn of latency (README "Security", its costly-bodies row).
 */
export const SMALL_BODY_BYTES = 64 * 1024;
/** See {@link SMALL_BODY_BYTES}: values as `JsonValueCounter` weighs them. */
export const SMALL_BODY_VALUES = 10_000;

/** 415: a completion body must be JSON, declared as such (README "Security": no browser form or text/plain request reaches a model). */
export const unsupportedMediaType = (got: string | undefined) =>
  new ApiError({
    code: 'unsupported_media_type',
    fields: { contentType: got ? echoed(got) : undefined },
  });

/** True for `application/json`, with or without parameters (`; charset=utf-8`), in any case. */
function isJson(contentType: string | undefined): boolean {
  if (contentType === 'application/json') return true;
  return contentType !== undefined && contentType.split(';', 1)[0].trim().toLowerCase() === 'application/json';
}

/**
 * The body gate of a completion route (README "Errors", "Security"), in this order:
 * 1. `Content-Type` must be `application/json` (any charset parameter): else `415
 *    unsupported_media_type`, before a byte of the body is read;
 * 2. a `Content-Length` over `gateway.max_body_bytes` is a `413 request_too_large` at once, from
 *    the header alone;
 * 3. the body is read ({@link readJsonBody}) and parsed into `req.body`; a body that passes the
 *    byte limit while it arrives (chunked, or compressed), or holds more than
 *    `gateway.max_body_values` JSON values, is a 413 as soon as it does, before it is parsed.
 * Every refusal here is answered before the rest of the body is read, and the connection is then
 * closed (the error middleware sees the request incomplete). The limits are read per request so a
 * config refresh changes them.
 */
export function completionBody(
  limits: () => Pick<GatewaySettings, 'max_body_bytes' | 'max_body_values'>,
): GatewayHandler {
  return (req, _res, next) => {
    const contentType = req.headers['content-type'];
    if (!isJson(contentType)) return next(unsupportedMediaType(contentType));
    const { max_body_bytes: limit, max_body_values: maxValues } = limits();
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > limit) return next(requestTooLarge(limit));
    readJsonBody(req, limit, maxValues).then((body) => {
      req.body = body;
      next();
    }, next);
  };
}

/** The decoder of a `Content-Encoding`, or `undefined` for none. */
function decoder(encoding: string): Transform | undefined {
  switch (encoding) {
    case 'identity':
      return undefined;
    case 'gzip':
    case 'x-gzip':
      return createGunzip();
    case 'deflate':
      return createInflate();
    case 'br':
      return createBrotliDecompress();
    default:
      throw invalidRequest(
        `The request body's Content-Encoding "${echoed(encoding)}" is not supported; send UTF-8 JSON, uncompressed or as gzip, deflate or br.`,
      );
  }
}

/**
 * Reads a request body as UTF-8 JSON, at most `limit` bytes, counted both as received and as
 * decoded (gzip, deflate, br), so neither a large upload nor a compression bomb is read past the
 * limit, and at most `maxValues` JSON values ({@link JsonValueCounter}, counted on the decoded
 * bytes as they arrive, so `JSON.parse` never sees a body of more): the moment a count passes its
 * limit, reading stops and the promise rejects with a 413. An empty body is `{}`. A body past
 * {@link SMALL_BODY_BYTES} or {@link SMALL_BODY_VALUES} is parsed on its own turn of the event loop
 * ({@link onePerTurn}), so a burst of costly bodies never holds the loop for more than one of them.
 * @throws ApiError 413 `request_too_large` (naming `gateway.max_body_bytes` or
 *   `gateway.max_body_values`); 400 `invalid_request_error` for a charset other than
 *   UTF-8, an unknown encoding, a corrupt compressed body or invalid JSON; 499 when the client
 *   went away first.
 */
export function readJsonBody(req: IncomingMessage, limit: number, maxValues: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const contentType = req.headers['content-type'];
    // The common `application/json` names no charset: no regex for it.
    const charset =
      contentType === 'application/json'
        ? undefined
        : /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1]?.toLowerCase();
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      reject(invalidRequest(`The request body's charset "${echoed(charset)}" is not supported; send UTF-8 JSON.`));
      return;
    }
    let decode: Transform | undefined;
    try {
      const encoding = req.headers['content-encoding'];
      decode = encoding === undefined ? undefined : decoder(encoding.trim().toLowerCase());
    } catch (err) {
      reject(err);
      return;
    }
    const chunks: Buffer[] = [];
    const values = new JsonValueCounter();
    let received = 0;
    let decoded = 0;
    let settled = false;
    const stop = (err: unknown) => {
      if (settled) return;
      settled = true;
      req.off('data', onWire);
      req.off('data', onDecoded);
      req.unpipe();
      req.pause();
      decode?.destroy();
      reject(err);
    };
    const onWire = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limit) stop(requestTooLarge(limit));
    };
    const onDecoded = (chunk: Buffer) => {
      decoded += chunk.length;
      if (decoded > limit) return stop(requestTooLarge(limit));
      if (!values.feed(chunk, maxValues)) return stop(tooManyValues(maxValues));
      chunks.push(chunk);
    };
    const parse = () => {
      // A client gone while its body waited for its turn costs nothing more.
      if (req.socket?.destroyed) return reject(clientClosed());
      const text = (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)).toString('utf8');
      if (text.trim() === '') return resolve({});
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(
          invalidRequest(
            'The request body is not a valid JSON object. Send a JSON object with Content-Type: application/json.',
          ),
        );
      }
    };
    const onEnd = () => {
      if (settled) return;
      settled = true;
      // The route checks the body in the same turn (its handler runs in the promise's reaction).
      if (decoded <= SMALL_BODY_BYTES && values.count <= SMALL_BODY_VALUES) parse();
      else onePerTurn(parse);
    };
    // Plain listeners, no once-wrappers per request: each event comes once, and `stop` and `onEnd` act once.
    const gone = () => stop(clientClosed());
    req.on('aborted', gone);
    req.on('error', gone);
    if (decode) {
      req.on('data', onWire);
      decode.on('data', onDecoded);
      decode.on('end', onEnd);
      decode.on('error', () =>
        stop(
          invalidRequest(
            'The request body could not be decoded. Send UTF-8 JSON, uncompressed or with a valid Content-Encoding.',
          ),
        ),
      );
      req.pipe(decode);
    } else {
      // Uncompressed: what is received is what is decoded, one listener counts both.
      req.on('data', onDecoded);
      req.on('end', onEnd);
    }
  });
}
