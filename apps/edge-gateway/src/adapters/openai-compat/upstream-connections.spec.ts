import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UpstreamConnections } from './upstream-connections';

// A call cut before undici wrote it (its signal aborted while it waited for its turn on a kept-alive socket)
// closes that socket by halves (half-close.ts). The socket has sent its FIN: the pool's next call must take
// another connection, never be written after the FIN (README "Connections to an upstream").
describe('UpstreamConnections: a call cut as it is about to be written', () => {
  let server: Server;
  let origin: string;
  const connections = new Set<unknown>();
  beforeAll(async () => {
    server = createServer((req, res) => {
      connections.add(req.socket);
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const post = (pool: UpstreamConnections, signal = new AbortController().signal) =>
    pool.post({
      origin,
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from('{"model":"m"}'),
      signal,
    });

  it.each([
    ['at once', (abort: () => void) => abort()],
    ['on the next tick', (abort: () => void) => process.nextTick(abort)],
    ['on the next turn of the loop', (abort: () => void) => setImmediate(abort)],
  ])('cut %s: the next calls on the pool are answered', async (_when, schedule) => {
    const pool = new UpstreamConnections(60_000, 2000);
    try {
      // A kept-alive connection in the pool, idle.
      const first = await post(pool);
      expect(first.statusCode).toBe(200);
      await first.body.text();
      const cut = new AbortController();
      const cutCall = post(pool, cut.signal);
      schedule(() => cut.abort(new Error('client left')));
      await cutCall.then((r) => r.body.text()).catch(() => undefined);
      for (let i = 0; i < 5; i++) {
        const next = await post(pool);
        expect(next.statusCode).toBe(200);
        expect(await next.body.json()).toEqual({ ok: true });
      }
    } finally {
      await pool.close();
    }
  });
});
