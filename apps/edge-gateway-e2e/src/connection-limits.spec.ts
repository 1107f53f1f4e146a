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
const KEEP_ALIVE_MS = 2500;
/** The default share of one address: half of max_connections. */
const SHARE = MAX_CONNECTIONS / 2;

/** fleetYaml with the connection settings of this file. */
const yaml = () =>
  fleetYaml({ maxBodyBytes: MAX_BODY }).replace(
    'gateway:\n',
    `gateway:\n  max_connections: ${MAX_CONNECTIONS}\n  keep_alive_timeout_ms: ${KEEP_ALIVE_MS}\n  header_timeout_ms: ${HEADER_MS}\n  body_timeout_ms: ${BODY_MS}\n`,
  );

interface RawConnection {
  socket: Socket;
  /** Everything the server sent so far. */
  received(): string;
  /** Resolves when the server closed the connection: ms since the socket opened, and what it had sent. */
  closed: Promise<{ afterMs: number; text: string }>;
}

/** Opens a raw connection to `url`, from `localAddress` (any 127.x.y.z on Linux loopback) when given. */
function open(url: string, localAddress?: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const openedAt = Date.now();
    let text = '';
    const socket = connect({ port: Number(port), host: hostname, localAddress });
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

/** Waits until `c` has received `n` answers (status lines), at most 5 s. */
async function answers(c: RawConnection, n: number): Promise<void> {
  const deadline = Date.now() + 5000;
  while ((c.received().match(/HTTP\/1\.1 \d{3} /g) ?? []).length < n) {
    if (Date.now() > deadline || c.socket.destroyed) throw new Error(`no answer ${n}: ${c.received()}`);
    await sleep(5);
  }
}

/** A keep-alive connection from `from` that got one `/healthz` answer and now sits idle. */
async function idleConnection(url: string, from: string): Promise<RawConnection> {
  const c = await open(url, from);
  c.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await answers(c, 1);
  return c;
}

/** True once `c` is closed by the server (waits at most `ms`). */
const closedWithin = (c: RawConnection, ms: number) =>
  Promise.race([c.closed.then(() => true), sleep(ms).then(() => false)]);

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

  it('one address holds at most its share: past it, its own oldest idle connection is closed for the new one', async () => {
    const idle: RawConnection[] = [];
    for (let i = 0; i < SHARE; i++) idle.push(await idleConnection(gateway.url, '127.0.0.1'));
    const extra = await open(gateway.url, '127.0.0.1');
    extra.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await answers(extra, 1);
    expect(extra.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(await closedWithin(idle[0], 2000)).toBe(true);
    expect(idle.slice(1).some((c) => c.socket.destroyed)).toBe(false);
    for (const c of [...idle, extra]) c.socket.destroy();
  });

  it('at max_connections the oldest idle keep-alive connection is closed for a new client: idle ones never keep /healthz out', async () => {
    const idle: RawConnection[] = [];
    for (const from of ['127.0.0.1', '127.0.0.2'])
      for (let i = 0; i < SHARE; i++) idle.push(await idleConnection(gateway.url, from));
    // Every slot is taken by an idle connection; a third client still gets its answer.
    const probe = await open(gateway.url, '127.0.0.3');
    probe.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    await answers(probe, 1);
    expect(probe.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(await closedWithin(idle[0], 2000)).toBe(true);
    expect(idle.slice(1).filter((c) => c.socket.destroyed)).toHaveLength(0);
    for (const c of [...idle, probe]) c.socket.destroy();
  });

  it('closes an idle keep-alive connection after keep_alive_timeout_ms', async () => {
    const c = await idleConnection(gateway.url, '127.0.0.1');
    const { afterMs } = await c.closed;
    expect(afterMs).toBeGreaterThanOrEqual(KEEP_ALIVE_MS - 100);
    expect(afterMs).toBeLessThan(KEEP_ALIVE_MS + 1500);
  });

  it('refuses connections past max_connections when none is idle, /healthz included, and serves again once slow ones are cut', async () => {
    // Slow ones from two addresses, each within its share: the cap, not the share, refuses the next.
    const slow = await Promise.all(
      Array.from({ length: MAX_CONNECTIONS }, (_, i) => open(gateway.url, i % 2 === 0 ? '127.0.0.1' : '127.0.0.2')),
    );
    for (const c of slow) trickle(c.socket, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ' + 'a'.repeat(500), 50);
    await sleep(100);
    // At the cap, none idle: a new connection is closed at once, without an answer.
    const extra = await open(gateway.url, '127.0.0.3');
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
