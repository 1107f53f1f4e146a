import { rawExchange } from '@iop/dispatch/testing';
import { exporterYaml } from '@iop/fake-upstream';
import { parseConfigText } from '@iop/validate';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createExporterApp } from './exporter-app';
import { answerContinue } from './http/continue-gate';

const STATUS_KEY = 'status-key-1';

/** README "Security": with `status.api_keys` set, an unauthenticated caller of the exporter gets the 401 and nothing else. */
describe('the exporter gives unauthenticated callers nothing but the 401', () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    const loaded = parseConfigText(exporterYaml({ prefix: 'unauth', statusKeys: [STATUS_KEY] }), {}, 'edge.yaml');
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const config = loaded.config;
    const app = createExporterApp({
      config: () => config,
      counts: async () => ({ providers: new Map(), clients: [] }),
      logger: pino({ level: 'silent' }),
    });
    // Wired as `exporter.ts` wires it.
    server = createServer(app);
    answerContinue(server, () => config.status.api_keys, app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const request = (method: string, path: string, extra: string[] = []) =>
    rawExchange(url, [[`${method} ${path} HTTP/1.1`, 'Host: x', 'Connection: close', ...extra, '', ''].join('\r\n')], {
      timeoutMs: 3000,
    });
  const code = (body: string) => (JSON.parse(body) as { error: { code: string } }).error.code;

  const UNKNOWN = ['/x', '//status', '/./status', '/queues-nope', '*'];

  it.each(UNKNOWN)('GET %s without a key: 401 with a Basic challenge, no list of what is served', async (path) => {
    const res = await request('GET', path);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Basic /);
    expect(code(res.body)).toBe('invalid_api_key');
    expect(res.body).not.toContain('/metrics');
  });

  it.each(UNKNOWN.filter((p) => p !== '*'))('GET %s with the key: the 404 naming what is served', async (path) => {
    const res = await request('GET', path, [`Authorization: Bearer ${STATUS_KEY}`]);
    expect(res.status).toBe(404);
    expect(code(res.body)).toBe('not_found');
  });

  it.each(['/status', '/metrics', '/', '/x'])(
    'POST %s with Expect: 100-continue and no key: the 401 instead of 100 Continue, closed before any body byte',
    async (path) => {
      const res = await request('POST', path, ['Content-Length: 99999999', 'Expect: 100-continue']);
      expect(res.text).not.toContain('100 Continue');
      expect(res.status).toBe(401);
      expect(res.headers['connection']).toBe('close');
      expect(code(res.body)).toBe('invalid_api_key');
    },
  );

  it('the neighbours: with the key, or on /healthz, 100 Continue and the route answers', async () => {
    const keyed = await rawExchange(
      url,
      [
        [
          'POST /status HTTP/1.1',
          'Host: x',
          'Connection: close',
          'Content-Length: 2',
          'Expect: 100-continue',
          `Authorization: Bearer ${STATUS_KEY}`,
          '',
          '',
        ].join('\r\n'),
        '{}',
      ],
      { gapMs: 200, timeoutMs: 3000 },
    );
    expect(keyed.text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 405 /);
    const probe = await rawExchange(
      url,
      [
        [
          'POST /healthz HTTP/1.1',
          'Host: x',
          'Connection: close',
          'Content-Length: 2',
          'Expect: 100-continue',
          '',
          '',
        ].join('\r\n'),
        '{}',
      ],
      { gapMs: 200, timeoutMs: 3000 },
    );
    expect(probe.text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 405 /);
  });
});
