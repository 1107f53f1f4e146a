import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { connect, type Socket } from 'node:net';
import { spawnGateway, writeTempConfig, type GatewayProcess } from './testing/gateway-process';

/**
 * README "Security": a connection cap (`gateway.max_connections`), bounded header and body times
 * (`gateway.header_timeout_ms`, `gateway.body_timeout_ms`) and a 413 answered from `Content-Length`
 * at once, the connection closed. Checked on a real gateway process over raw sockets.
 */
const HEADER_MS = 800;
const BODY_MS = 800;
const MAX_CONNECTIONS = 20;
const MAX_BODY = 4096;

/** fleetYaml with the connection settings of this file. */
const yaml = () =>
  fleetYaml({ maxBodyBytes: MAX_BODY }).replace(
    'gateway:\n',
    `gateway:\n  max_connections: ${MAX_CONNECTIONS}\n  header_timeout_ms: ${HEADER_MS}\n  body_timeout_ms: ${BODY_MS}\n`,
  );

interface RawConnection {
  socket: Socket;
  /** Everything the server sent so far. */
  received(): string;
  /** Resolves when the server closed the connection: ms since the socket opened, and what it had sent. */
  closed: Promise<{ afterMs: number; text: string }>;
}

function open(url: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const openedAt = Date.now();
    let text = '';
    const socket = connect(Number(port), hostname);
    const closed = new Promise<{ afterMs: number; text: string }>((done) =>
      socket.once('close', () => done({ afterMs: Date.now() - openedAt, text })),
    );
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.once('connect', () => resolve({ socket, received: () => text, closed }));
    socket.once('error', reject);
  });
}

/** Writes `text` one byte every `gapMs` until the socket closes or the text is out. */
function trickle(socket: Socket, text: string, gapMs: number): void {
  let i = 0;
  const timer = setInterval(() => {
    if (i >= text.length || socket.destroyed) return clearInterval(timer);
    socket.write(text[i++]);
  }, gapMs);
  socket.once('close', () => clearInterval(timer));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('connection limits of a gateway process (README "Security")', () => {
  let upstream: FakeUpstream;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await spawnGateway(writeTempConfig(yaml()), { env: { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' } });
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream.close();
  });

  it('closes a connection whose headers arrive slower than header_timeout_ms, with a 408', async () => {
    const c = await open(gateway.url);
    trickle(
      c.socket,
      'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Pad: ' + 'a'.repeat(200),
      50,
    );
    const { afterMs, text } = await c.closed;
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(afterMs).toBeGreaterThanOrEqual(HEADER_MS - 50);
    expect(afterMs).toBeLessThan(HEADER_MS + 1000);
  });

  it('closes a connection that opens and sends nothing after header_timeout_ms', async () => {
    const c = await open(gateway.url);
    const { afterMs } = await c.closed;
    expect(afterMs).toBeLessThan(HEADER_MS + 1000);
  });

  it('closes a connection whose body arrives slower than body_timeout_ms, with a 408, and calls no upstream', async () => {
    upstream.reset();
    const c = await open(gateway.url);
    const body = JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'x'.repeat(300) }] });
    c.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    trickle(c.socket, body, 50);
    const { afterMs, text } = await c.closed;
    expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect(afterMs).toBeLessThan(HEADER_MS + BODY_MS + 1000);
    expect(upstream.stats().total).toBe(0);
  });

  it('answers a Content-Length over max_body_bytes with 413 at once and closes without reading the body', async () => {
    const c = await open(gateway.url);
    const declared = 300 * 1024 * 1024;
    c.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`,
    );
    // Keep sending as fast as the socket takes it, as a client uploading 300 MB would.
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    const pump = () => {
      while (!c.socket.destroyed && sent < declared && c.socket.write(chunk)) sent += chunk.length;
    };
    c.socket.on('drain', () => {
      sent += chunk.length;
      pump();
    });
    const startedAt = Date.now();
    pump();
    await new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (/\r\n\r\n/.test(c.received()) || c.socket.destroyed) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });
    const answeredMs = Date.now() - startedAt;
    const { text } = await c.closed;
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(text.toLowerCase()).toContain('connection: close');
    expect(text).toContain('"code":"request_too_large"');
    expect(answeredMs).toBeLessThan(1000);
    // Closed long before the upload could finish: the gateway read a tiny part of it at most.
    expect(sent).toBeLessThan(declared / 10);
  });

  it('answers Expect: 100-continue with the 413 instead of 100 Continue when Content-Length is over the limit', async () => {
    const c = await open(gateway.url);
    c.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${300 * 1024 * 1024}\r\nExpect: 100-continue\r\nX-Request-Id: big-upload-1\r\n\r\n`,
    );
    const { text } = await c.closed;
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(text).not.toContain('100 Continue');
    expect(text.toLowerCase()).toContain('x-request-id: big-upload-1\r\n');
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toMatchObject({
      error: { code: 'request_too_large' },
    });
  });

  it('continues a small body sent with Expect: 100-continue', async () => {
    const body = JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'x' }] });
    const c = await open(gateway.url);
    c.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`,
    );
    await new Promise<void>((resolve) => {
      const check = setInterval(() => /100 Continue/.test(c.received()) && (clearInterval(check), resolve()), 5);
    });
    c.socket.write(body);
    const { text } = await c.closed;
    expect(text).toMatch(/HTTP\/1\.1 200 /);
  });

  it('answers a chunked body that passes max_body_bytes with 413 and closes the connection', async () => {
    const c = await open(gateway.url);
    c.socket.write(
      'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
    );
    const piece = 'a'.repeat(1024);
    for (let i = 0; i < 8; i++) c.socket.write(`${piece.length.toString(16)}\r\n${piece}\r\n`);
    const { text } = await c.closed;
    expect(text).toMatch(/^HTTP\/1\.1 413 /);
    expect(text.toLowerCase()).toContain('connection: close');
  });

  it('refuses connections past max_connections, /healthz included, and serves again once slow ones are cut', async () => {
    const slow = await Promise.all(Array.from({ length: MAX_CONNECTIONS }, () => open(gateway.url)));
    for (const c of slow) trickle(c.socket, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ' + 'a'.repeat(500), 50);
    await sleep(100);
    // At the cap: a new connection is closed at once, without an answer.
    const extra = await open(gateway.url);
    extra.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    const refused = await Promise.race([extra.closed, sleep(2000).then(() => undefined)]);
    expect(refused).toBeDefined();
    expect(refused!.text).toBe('');
    // The slow connections are cut at header_timeout_ms; then probes get through again.
    const cut = await Promise.all(slow.map((c) => c.closed));
    expect(Math.max(...cut.map((c) => c.afterMs))).toBeLessThan(HEADER_MS + 1500);
    const health = await fetch(`${gateway.url}/healthz`);
    expect(health.status).toBe(200);
  });

  it('lets a response stream on far longer than header_timeout_ms + body_timeout_ms', async () => {
    const res = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'small',
        stream: true,
        messages: [{ role: 'user', content: 'x' }],
        fake: { chunks: 12, chunk_gap_ms: 250 },
      }),
    });
    const startedAt = Date.now();
    const text = await res.text();
    expect(Date.now() - startedAt).toBeGreaterThan(HEADER_MS + BODY_MS);
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('keeps an idle keep-alive connection past header_timeout_ms and serves its next request', async () => {
    const c = await open(gateway.url);
    c.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await sleep(HEADER_MS + 700);
    c.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await sleep(300);
    expect(c.received().match(/HTTP\/1\.1 200 /g)).toHaveLength(2);
    c.socket.destroy();
  });
});
