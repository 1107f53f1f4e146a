import { freePort, waitUntil } from '@iop/dispatch/testing';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readmeErrorRows } from '../docs/readme-errors-table';
import { findHaproxy, HAPROXY_CONFIG, haproxyServers } from '../haproxy';
import { WORKSPACE_ROOT } from '../local-fleet';
import { ManagedProcess } from '../managed-process';

const CONFIG_TEXT = readFileSync(path.join(WORKSPACE_ROOT, HAPROXY_CONFIG), 'utf8');
/** The config's lines without comments. */
const LINES = CONFIG_TEXT.split('\n')
  .map((l) => l.replace(/#.*$/, '').trim())
  .filter(Boolean);

/** The `http-error` answers of the config: status, headers and the JSON body. */
const httpErrors = LINES.filter((l) => l.startsWith('http-error ')).map((line) => {
  const status = Number(/status (\d{3})/.exec(line)?.[1]);
  const body = /string '(.*)'$/.exec(line)?.[1] ?? '';
  return {
    status,
    contentType: /content-type (\S+)/.exec(line)?.[1],
    retryAfter: /hdr retry-after (\S+)/.exec(line)?.[1],
    body: JSON.parse(body) as { error: { message: string; type: string; param: null; code: string } },
  };
});

describe('deploy/haproxy/haproxy.cfg', () => {
  it('retries only connections that failed to open, never a request that may have reached a gateway', () => {
    expect(LINES.filter((l) => l.startsWith('retry-on '))).toEqual(['retry-on conn-failure']);
    // One connection per request on both sides: no request on a reused gateway connection it is closing,
    // and no request that is not the first on its client connection (HAProxy answers those nothing).
    expect(LINES).toContain('option httpclose');
    expect(LINES).not.toContain('option http-server-close');
    expect(LINES).not.toContain('option http-keep-alive');
    expect(LINES.some((l) => /shutdown-sessions/.test(l))).toBe(false);
  });

  it('answers its own 400, 408, 502, 503 and 504 as OpenAI-shaped JSON, 503 with Retry-After', () => {
    expect(httpErrors.map((e) => e.status)).toEqual([400, 408, 502, 503, 504]);
    for (const e of httpErrors) {
      expect(e.contentType).toBe('application/json');
      expect(Object.keys(e.body.error)).toEqual(['message', 'type', 'param', 'code']);
      expect(e.body.error.type).toBe(e.status >= 500 ? 'server_error' : 'invalid_request_error');
      expect(e.body.error.param).toBeNull();
    }
    expect(httpErrors.filter((e) => e.retryAfter).map((e) => [e.status, e.retryAfter])).toEqual([[503, '1']]);
  });

  it('the README "Errors" table lists exactly these codes as the load balancer\'s, with their statuses and Retry-After', () => {
    const rows = readmeErrorRows().filter((r) => r.loadBalancer);
    expect(rows.map((r) => ({ status: r.status, code: r.code, retryAfter: r.when.includes('Retry-After') }))).toEqual(
      httpErrors.map((e) => ({ status: e.status, code: e.body.error.code, retryAfter: e.retryAfter !== undefined })),
    );
  });
});

/** A stand-in gateway: `/readyz` answers 200; a completion is read in full, counted, and its connection destroyed (a crash). */
class CrashingGateway {
  completions = 0;
  port = 0;
  private server!: Server;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      if (req.url === '/readyz') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      req.resume();
      req.on('end', () => {
        this.completions++;
        req.socket.destroy();
      });
    });
    this.port = await freePort();
    await new Promise<void>((r) => this.server.listen(this.port, '127.0.0.1', () => r()));
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** POSTs a completion through HAProxy with a fresh connection; resolves to its status, headers and body. */
function post(port: number): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', agent: false },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.setHeader('content-type', 'application/json');
    req.end(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }));
  });
}

/** HAProxy from Debian on the shipped file, in front of stand-in gateways. */
describe('HAProxy on the shipped config, as a process', () => {
  let dir: string;
  let haproxy: ManagedProcess | undefined;
  const gateways: CrashingGateway[] = [];
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'iop-lb-'));
  });
  afterEach(async () => {
    await haproxy?.stop('SIGTERM');
    haproxy?.closeLog();
    haproxy = undefined;
    for (const g of gateways.splice(0)) await g.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const start = async (servers: string[]) => {
    const [lb, stats] = [await freePort(), await freePort()];
    haproxy = new ManagedProcess({
      name: 'haproxy',
      command: findHaproxy(),
      args: ['-db', '-f', HAPROXY_CONFIG],
      cwd: WORKSPACE_ROOT,
      env: {
        IOP_LB_BIND: `127.0.0.1:${lb}`,
        IOP_LB_STATS_BIND: `127.0.0.1:${stats}`,
        IOP_LB_ADMIN_SOCKET: path.join(dir, `admin-${lb}.sock`),
        ...Object.fromEntries(servers.map((s, i) => [`IOP_GATEWAY_${i + 1}`, s])),
      },
    });
    await haproxy.start();
    return { lb, stats: `http://127.0.0.1:${stats}` };
  };

  it('no replica up: 503 no_available_replica as OpenAI JSON with Retry-After, not HAProxy HTML', async () => {
    const closed = await Promise.all([freePort(), freePort(), freePort()]);
    const { lb, stats } = await start(closed.map((p) => `127.0.0.1:${p}`));
    await waitUntil(
      async () => (await haproxyServers(stats).catch(() => [])).filter((s) => s.status.startsWith('DOWN')).length === 3,
      10_000,
      'every server DOWN',
    );
    const res = await post(lb);
    expect(res.status).toBe(503);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.headers['retry-after']).toBe('1');
    expect(JSON.parse(res.body)).toEqual({
      error: { message: expect.any(String), type: 'server_error', param: null, code: 'no_available_replica' },
    });
  });

  it('a replica that dies with the request: 502 replica_error as JSON, and the request is never sent to another replica', async () => {
    for (let i = 0; i < 3; i++) {
      const g = new CrashingGateway();
      await g.start();
      gateways.push(g);
    }
    const { lb, stats } = await start(gateways.map((g) => `127.0.0.1:${g.port}`));
    await waitUntil(
      async () => (await haproxyServers(stats).catch(() => [])).filter((s) => s.status === 'UP').length === 3,
      10_000,
      'every server UP',
    );
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await post(lb));
    for (const res of answers) {
      expect(res.status).toBe(502);
      expect(JSON.parse(res.body).error).toMatchObject({ type: 'server_error', code: 'replica_error' });
    }
    // Each request reached one gateway once: none was re-sent after the connection died under it.
    expect(gateways.reduce((n, g) => n + g.completions, 0)).toBe(answers.length);
  });
});
