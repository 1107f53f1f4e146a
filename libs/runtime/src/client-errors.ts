import { catalogAnswer, catalogMessage, echoed, type ErrorCode } from '@iop/errors';
import { randomUUID } from 'node:crypto';
import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Requests Node's HTTP parser refuses before the app ever runs (README "Errors"): a bad request
 * line, a `Content-Length` that leaves stray bytes where the next request should start, headers too
 * large, a request that does not arrive in full in time. Node answers those with a bare
 * `HTTP/1.1 400 Bad Request` and no body; here they get what every other error gets: an
 * OpenAI-shaped JSON body with the right status and an `x-request-id`, never a stack trace.
 */

/** The log line of each answered request: pino's `(obj, msg)`, as `LibLogger`. */
export interface ClientErrorLogger {
  info(obj: object, msg: string): void;
}

/** What {@link answerClientErrors} reports to. */
export interface ClientErrorOptions {
  /** Gets one info line per answered request, with its request id. */
  logger?: ClientErrorLogger;
  /**
   * Called with a connection once it is answered and only lingers for the client to read the
   * answer: a server that counts connections may close it first to make room.
   */
  onLinger?(socket: Socket): void;
  /** The request id of a request answered `417` (default: a new UUID), e.g. the client's own `x-request-id` when kept. */
  requestIdOf?(req: IncomingMessage): string;
}

/** After the answer, how long the server still reads and drops what the client sends before it cuts the connection, in ms. */
export const CLIENT_ERROR_LINGER_MS = 1000;
/** ... and how many bytes at most. */
export const CLIENT_ERROR_LINGER_BYTES = 1024 * 1024;

/**
 * The answer to a request Node's parser refused, from the parser's error (`err.code`): 431
 * `request_header_fields_too_large` (headers over `http.maxHeaderSize`), 408 `request_timeout` (the
 * server's `headersTimeout` or `requestTimeout` ran out), 413 `request_too_large` (chunk extensions
 * too large), else 400 `invalid_request_error` naming llhttp's code and reason (fixed strings of the
 * parser, never the request's bytes).
 */
export function clientErrorAnswer(err: Error & { code?: unknown; reason?: unknown }): {
  code: ErrorCode;
  message: string;
} {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return {
        code: 'request_header_fields_too_large',
        message: catalogMessage('request_header_fields_too_large', { limitBytes: maxHeaderSize }),
      };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { code: 'request_timeout', message: catalogMessage('request_timeout') };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return {
        code: 'request_too_large',
        message: "The request's chunk extensions are larger than the server reads; the connection is closed.",
      };
  }
  const code = typeof err.code === 'string' && /^HPE_[A-Z_]+$/.test(err.code) ? err.code : 'HPE_INVALID';
  const reason = typeof err.reason === 'string' && /^[\w .,:'/-]{1,80}$/.test(err.reason) ? `: ${err.reason}` : '';
  return {
    code: 'invalid_request_error',
    message: `The request is not valid HTTP/1.1 (${code}${reason}); the connection is closed.`,
  };
}

/** Sockets already answered: Node's parser reports every later chunk of such a connection again. */
const answered = new WeakMap<Socket, number>();

/**
 * Answers `server`'s `clientError` events ({@link clientErrorAnswer}) whenever the socket can still
 * take an answer: it is writable and no answer of an earlier request on it has begun (else the
 * connection is cut, as Node does). The answer is written raw, `Connection: close`, with the
 * `x-request-id` of the request in progress when the app already gave it one, else a new UUID, and
 * logged at info with that id; the connection is half-closed, then cut once the client is done or
 * after {@link CLIENT_ERROR_LINGER_MS} or {@link CLIENT_ERROR_LINGER_BYTES} more bytes (cutting it at
 * once with unread bytes would make the kernel reset it and lose the answer); `onLinger` hears of
 * it. Node's default answer (`server.on('clientError')` absent) is documented in the Node.js HTTP
 * reference. An `Expect` other than `100-continue` is answered too ({@link answerExpectationFailed}).
 */
export function answerClientErrors(server: Server, { logger, onLinger, requestIdOf }: ClientErrorOptions = {}): void {
  answerExpectationFailed(server, logger, requestIdOf);
  server.on('clientError', (err: Error & { code?: unknown }, socket: Socket) => {
    const at = answered.get(socket);
    if (at !== undefined) {
      if (socket.bytesRead - at > CLIENT_ERROR_LINGER_BYTES) socket.destroy();
      return;
    }
    answered.set(socket, socket.bytesRead);
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const given = inFlight?.getHeader('x-request-id');
    const requestId = typeof given === 'string' ? given : randomUUID();
    const { code, message } = clientErrorAnswer(err);
    const answer = catalogAnswer(code, message);
    const body = JSON.stringify(answer.body);
    socket.end(
      `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\n` +
        'content-type: application/json; charset=utf-8\r\n' +
        `content-length: ${Buffer.byteLength(body)}\r\n` +
        `x-request-id: ${requestId}\r\n` +
        'connection: close\r\n\r\n' +
        body,
    );
    const cut = setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS);
    cut.unref();
    socket.once('close', () => clearTimeout(cut));
    onLinger?.(socket);
    logger?.info(
      { request_id: requestId, status: answer.status, code, parser_error: String(err.code ?? 'unknown') },
      `malformed HTTP request answered ${answer.status} before the app ran`,
    );
  });
}

/**
 * Answers `server`'s `checkExpectation` events, which Node emits for a request whose `Expect` header
 * is not `100-continue` (Node.js HTTP reference; without a listener Node answers a bare `417` with no
 * body): `417 expectation_failed` as an OpenAI-shaped body (README "Errors") quoting the header cut
 * by `echoed`, with an `x-request-id` (`requestIdOf`, default a new UUID) and `Connection: close`,
 * before the app runs and before the client sends its body (RFC 9110, section 10.1.1); logged at info.
 */
export function answerExpectationFailed(
  server: Server,
  logger?: ClientErrorLogger,
  requestIdOf: (req: IncomingMessage) => string = () => randomUUID(),
): void {
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const requestId = requestIdOf(req);
    const expect = echoed(String(req.headers.expect ?? ''));
    const answer = catalogAnswer('expectation_failed', catalogMessage('expectation_failed', { expect }));
    const body = JSON.stringify(answer.body);
    res.writeHead(answer.status, {
      ...answer.headers,
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'x-request-id': requestId,
      connection: 'close',
    });
    res.end(body);
    logger?.info(
      { request_id: requestId, status: answer.status, code: 'expectation_failed' },
      `request with an unmet Expect header answered ${answer.status} before the app ran`,
    );
  });
}
