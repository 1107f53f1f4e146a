import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { answerClientErrors, clientErrorAnswer } from './client-errors';

/** Writes `parts` on a fresh connection (`gapMs` apart) and resolves with every byte the server sent once it closes. */
function exchange(server: Server, parts: string[], gapMs = 0): Promise<string> {
  const { port } = server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    const timer = setTimeout(() => reject(new Error('the server never closed the connection')), 5000);
    socket.on('data', (d: Buffer) => got.push(d));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(got).toString('latin1'));
    });
    socket.once('connect', async () => {
      for (const part of parts) {
        socket.write(part);
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      }
    });
  });
}

/** The status, headers and parsed JSON body of the first answer in `text`. */
function answerOf(text: string) {
  const [head, body] = text.split('\r\n\r\n');
  const [statusLine, ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(
    lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 2)]),
  );
  return {
    status: Number(statusLine.split(' ')[1]),
    headers,
    json: JSON.parse(body) as { error: Record<string, unknown> },
  };
}

describe('requests Node refuses before the app runs get an OpenAI-shaped answer (README "Errors")', () => {
  let server: Server;
  const logged: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    server = createServer({ connectionsCheckingInterval: 50 }, (req, res) => {
      // An app that answers once the whole body is in.
      req.resume();
      req.on('end', () => res.end('{"ok":true}'));
    });
    server.headersTimeout = 300;
    server.requestTimeout = 600;
    answerClientErrors(server, { logger: { info: (obj) => logged.push(obj as Record<string, unknown>) } });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it.each([
    ['a bad request line', ['GET / HTTP/1.1 trailing\r\nHost: x\r\n\r\n'], 400, 'invalid_request_error'],
    ['a bad method', ['BR{EW / HTTP/1.1\r\nHost: x\r\n\r\n'], 400, 'invalid_request_error'],
    [
      'a Content-Length one byte short, then the extra byte',
      ['POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\n{"a":1}'],
      400,
      'invalid_request_error',
    ],
    [
      'headers larger than http.maxHeaderSize',
      [`GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`],
      431,
      'request_header_fields_too_large',
    ],
    ['headers slower than headersTimeout', ['GET / HTTP/1.1\r\nHost: x\r\n'], 408, 'request_timeout'],
    [
      'an Expect other than 100-continue',
      ['POST / HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Length: 2\r\n\r\n'],
      417,
      'expectation_failed',
    ],
    [
      'a body slower than requestTimeout',
      ['POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{"a"'],
      408,
      'request_timeout',
    ],
  ])('%s: its status with a JSON body, a request id and the connection closed', async (_what, parts, status, code) => {
    logged.length = 0;
    const text = await exchange(server, parts);
    const answer = answerOf(text);
    expect(answer.status).toBe(status);
    expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(answer.headers.connection).toBe('close');
    expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(text.split('\r\n\r\n')[1]));
    expect(answer.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(answer.json).toEqual({
      error: { message: expect.any(String), type: 'invalid_request_error', param: null, code },
    });
    expect(answer.json.error.message).not.toMatch(/\n\s+at |node:|\.js:\d/);
    // One answer, then the close: nothing more on the connection.
    expect(text.match(/HTTP\/1\.1 \d{3} /g)).toHaveLength(1);
    expect(logged).toEqual([expect.objectContaining({ request_id: answer.headers['x-request-id'], status })]);
  });

  it('answers a stray byte after an answered request with an answer of its own', async () => {
    const text = await exchange(server, ['POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}', '}'], 100);
    expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
  });

  it('names the parser code and its fixed reason, never the bytes sent', () => {
    const err = Object.assign(new Error('Parse Error: Invalid method encountered'), {
      code: 'HPE_INVALID_METHOD',
      reason: 'Invalid method encountered',
      rawPacket: Buffer.from('SECRET-TOKEN'),
    });
    expect(clientErrorAnswer(err)).toEqual({
      code: 'invalid_request_error',
      message:
        'The request is not valid HTTP/1.1 (HPE_INVALID_METHOD: Invalid method encountered); the connection is closed.',
    });
    expect(clientErrorAnswer(Object.assign(new Error('x'), { code: 'HPE_X', reason: 'echo <script>' })).message).toBe(
      'The request is not valid HTTP/1.1 (HPE_X); the connection is closed.',
    );
  });

  it('cuts a connection the client reset, writing nothing', async () => {
    const { port } = server.address() as AddressInfo;
    const accepted = new Promise<Socket>((r) => server.once('connection', r));
    const client = connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    client.on('data', (d: Buffer) => received.push(d));
    client.on('error', () => undefined);
    const closed = new Promise((r) => client.once('close', r));
    const socket = await accepted;
    logged.length = 0;
    server.emit('clientError', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), socket);
    await closed;
    expect(Buffer.concat(received).length).toBe(0);
    expect(logged).toEqual([]);
  });
});
