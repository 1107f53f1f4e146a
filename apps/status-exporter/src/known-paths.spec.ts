import { exporterYaml } from '@iop/fake-upstream';
import { parseConfigText } from '@iop/validate';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createExporterApp } from './exporter-app';

const STATUS_KEY = 'status-key-1';

/**
 * README "Errors": a known path with the wrong method is `405 method_not_allowed` with `Allow`,
 * OpenAI-shaped, never a 404; the pages behind the status keys ask for a key first (README "Security").
 */
describe("the exporter's GET paths answer another method with 405 and Allow", () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    const loaded = parseConfigText(exporterYaml({ prefix: 'known-paths', statusKeys: [STATUS_KEY] }), {}, 'edge.yaml');
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const app = createExporterApp({
      config: () => loaded.config,
      counts: async () => ({ providers: new Map(), clients: [] }),
      logger: pino({ level: 'silent' }),
    });
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });
  const auth = { authorization: `Bearer ${STATUS_KEY}` };

  it.each([
    ['/status', 'POST'],
    ['/metrics', 'PUT'],
    ['/healthz', 'DELETE'],
    ['/', 'POST'],
  ])('%s %s', async (path, method) => {
    const res = await fetch(`${url}${path}`, { method, headers: auth });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
    expect(await res.json()).toEqual({
      error: {
        message: `${method} is not allowed on ${path}; use GET, HEAD.`,
        type: 'invalid_request_error',
        param: null,
        code: 'method_not_allowed',
      },
    });
  });

  it.each(['/status', '/metrics', '/healthz', '/'])('GET and HEAD %s still answer 200', async (path) => {
    for (const method of ['GET', 'HEAD'])
      expect((await fetch(`${url}${path}`, { method, headers: auth })).status).toBe(200);
  });

  it('asks for the status key first on the pages behind it; /healthz needs none', async () => {
    expect((await fetch(`${url}/status`, { method: 'POST' })).status).toBe(401);
    expect((await fetch(`${url}/healthz`, { method: 'POST' })).status).toBe(405);
  });

  it('still answers an unknown path 404, echoing at most 200 characters of it', async () => {
    expect((await fetch(`${url}/statusx`, { method: 'POST', headers: auth })).status).toBe(404);
    const res = await fetch(`${url}/${'p'.repeat(5000)}`, { headers: auth });
    expect(res.status).toBe(404);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error).toMatchObject({ code: 'not_found', message: expect.stringContaining('…(4801 more characters)') });
    expect(error.message.length).toBeLessThan(500);
  });
});
