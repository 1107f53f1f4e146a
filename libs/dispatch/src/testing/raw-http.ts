import { connect } from 'node:net';

/** What a server answered on one raw connection, read until the server closed it. */
export interface RawExchange {
  /** Every byte the server sent, as latin1 text. */
  text: string;
  /** The status of the first answer, 0 when none came. */
  status: number;
  /** The first answer's headers, names lower-cased. */
  headers: Record<string, string>;
  /** The first answer's body (up to its `content-length`, else to the close). */
  body: string;
  /** ms from the connection's opening to its close. */
  afterMs: number;
}

/**
 * Opens a TCP connection to `url`'s host and port, writes `bytes` (strings or buffers, one write
 * each, `gapMs` apart), and resolves once the server closes the connection, with what it sent:
 * for tests of what an HTTP server does with requests no HTTP client would send (README "Errors").
 * @throws Error when nothing closes the connection within `timeoutMs`.
 */
export function rawExchange(
  url: string,
  bytes: Array<string | Buffer>,
  opts: { gapMs?: number; timeoutMs?: number } = {},
): Promise<RawExchange> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = connect(Number(port), hostname);
    const parts: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server did not close the connection within ${opts.timeoutMs ?? 5000} ms`));
    }, opts.timeoutMs ?? 5000);
    socket.on('data', (d: Buffer) => parts.push(d));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(parts).toString('latin1');
      const headEnd = text.indexOf('\r\n\r\n');
      const head = headEnd === -1 ? text : text.slice(0, headEnd);
      const [statusLine, ...lines] = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const rest = headEnd === -1 ? '' : text.slice(headEnd + 4);
      const length = Number(headers['content-length']);
      resolve({
        text,
        status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0),
        headers,
        body: Number.isFinite(length) ? rest.slice(0, length) : rest,
        afterMs: performance.now() - started,
      });
    });
    socket.once('connect', async () => {
      for (const [i, part] of bytes.entries()) {
        if (i > 0 && opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
        if (socket.destroyed) return;
        socket.write(part);
      }
    });
  });
}
