import { createServer, type Server, type Socket } from 'node:net';

/**
 * An upstream on raw `net` sockets, for tests where HTTP framing matters (README "Connections to an
 * upstream", "Streaming", "Errors"): it reads each request (head and `Content-Length` body) and
 * hands it to the test, which writes the answer's bytes itself — a keep-alive socket closed as a
 * request arrives, a stream cut mid-event, a body in any framing or `Content-Encoding`. For tests only.
 */

/** One request as the raw upstream read it. */
export interface RawRequest {
  method: string;
  /** The request target, e.g. `/v1/chat/completions`. */
  path: string;
  /** Header names lower-cased. */
  headers: Record<string, string>;
  body: string;
  /** The request body parsed as JSON (`{}` when it is not JSON). */
  json: Record<string, unknown>;
  /** Which connection carried it, counted from 1 in the order they were accepted. */
  connection: number;
  /** Its place on that connection, from 1: more than 1 means the gateway reused the socket. */
  onConnection: number;
}

/** What the test does with a request: writes its answer on `socket`, or closes it. */
export type RawHandler = (req: RawRequest, socket: Socket) => void | Promise<void>;

/** A running raw upstream. */
export interface RawUpstream {
  /** `http://127.0.0.1:<port>`. */
  origin: string;
  /** Every request read, in order. */
  requests: RawRequest[];
  /** Connections accepted so far. */
  connections(): number;
  /**
   * For each connection (index 0 = connection 1): ms from the end of its last answer written by
   * {@link writeAnswer} to the gateway closing it, once it did.
   */
  idleCloseMs: Array<number | undefined>;
  close(): Promise<void>;
}

/**
 * Starts a raw upstream on 127.0.0.1 and a free port; every request goes to `handler`.
 * `opts.allowHalfOpen`: the gateway's close (FIN) leaves the socket open for writing until the
 * handler ends it (default: Node ends it at once, as HTTP servers do).
 */
export async function startRawUpstream(
  handler: RawHandler,
  opts: { allowHalfOpen?: boolean } = {},
): Promise<RawUpstream> {
  const requests: RawRequest[] = [];
  const idleCloseMs: Array<number | undefined> = [];
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server: Server = createServer({ allowHalfOpen: opts.allowHalfOpen ?? false }, (socket) => {
    const connection = ++accepted;
    sockets.add(socket);
    idleCloseMs.push(undefined);
    socket.on('end', () => {
      const at = answeredAt.get(socket);
      if (at !== undefined) idleCloseMs[connection - 1] = performance.now() - at;
    });
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let buffered = Buffer.alloc(0);
    let onConnection = 0;
    socket.on('data', (data: Buffer) => {
      buffered = Buffer.concat([buffered, data]);
      for (;;) {
        const headEnd = buffered.indexOf('\r\n\r\n');
        if (headEnd === -1) return;
        const [requestLine, ...lines] = buffered.subarray(0, headEnd).toString('latin1').split('\r\n');
        const headers: Record<string, string> = {};
        for (const line of lines) {
          const colon = line.indexOf(':');
          headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
        }
        const length = Number(headers['content-length'] ?? 0);
        if (buffered.length < headEnd + 4 + length) return;
        const body = buffered.subarray(headEnd + 4, headEnd + 4 + length).toString('utf8');
        buffered = buffered.subarray(headEnd + 4 + length);
        const [method, path] = requestLine.split(' ');
        let json: Record<string, unknown> = {};
        try {
          json = JSON.parse(body) as Record<string, unknown>;
        } catch {
          // not JSON
        }
        const req = { method, path, headers, body, json, connection, onConnection: ++onConnection };
        requests.push(req);
        void handler(req, socket);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    connections: () => accepted,
    idleCloseMs,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** How a raw answer delimits its body (RFC 9112, section 6.3). */
export type Framing = 'content-length' | 'chunked' | 'close';

/**
 * Writes one whole answer: status line, `headers`, and `body` in `framing` (`chunked`: one chunk per
 * element of `body` when it is a list). `close` framing ends the connection after the body.
 */
export function writeAnswer(
  socket: Socket,
  status: number,
  headers: Record<string, string>,
  body: string | Buffer | Array<string | Buffer>,
  framing: Framing = 'content-length',
): void {
  const parts = (Array.isArray(body) ? body : [body]).map((p) => (typeof p === 'string' ? Buffer.from(p) : p));
  const whole = Buffer.concat(parts);
  const head = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
  if (framing === 'content-length') head.push(`content-length: ${whole.length}\r\n`);
  if (framing === 'chunked') head.push('transfer-encoding: chunked\r\n');
  if (framing === 'close') head.push('connection: close\r\n');
  socket.write(`HTTP/1.1 ${status} ${status === 200 ? 'OK' : 'Status'}\r\n${head.join('')}\r\n`);
  if (framing === 'chunked') {
    for (const part of parts) if (part.length > 0) socket.write(Buffer.concat([chunkHead(part.length), part, CRLF]));
    socket.write('0\r\n\r\n');
  } else socket.write(whole);
  answeredAt.set(socket, performance.now());
  if (framing === 'close') socket.end();
}

/** When {@link writeAnswer} last finished an answer on each socket. */
const answeredAt = new WeakMap<Socket, number>();

const CRLF = Buffer.from('\r\n');
/** The size line of one chunk of a chunked body. */
export const chunkHead = (size: number) => Buffer.from(`${size.toString(16)}\r\n`);

/** How the raw upstream's stream ends after its last bytes. */
export type Ending = 'chunked, connection cut' | 'chunked, body ended' | 'close-delimited' | 'content-length';
export const ENDINGS: Ending[] = [
  'chunked, connection cut',
  'chunked, body ended',
  'close-delimited',
  'content-length',
];

/** Writes `parts` (the stream's bytes, one write each) as an SSE answer ending as `ending` says. */
export function writeStream(socket: Socket, parts: string[], ending: Ending): void {
  const bytes = parts.map((p) => Buffer.from(p));
  const length = bytes.reduce((n, b) => n + b.length, 0);
  const framing =
    ending === 'content-length'
      ? `content-length: ${length}`
      : ending === 'close-delimited'
        ? 'connection: close'
        : 'transfer-encoding: chunked';
  socket.write(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n${framing}\r\n\r\n`);
  for (const b of bytes)
    socket.write(ending.startsWith('chunked') ? Buffer.concat([chunkHead(b.length), b, Buffer.from('\r\n')]) : b);
  if (ending === 'chunked, body ended') socket.write('0\r\n\r\n');
  // A cut chunked body and a close-delimited one end with the connection; the others keep it.
  if (ending === 'chunked, connection cut' || ending === 'close-delimited') socket.end();
}
