import { rawExchange } from '@iop/dispatch/testing';
import { fleetYaml, startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

const KEY = 'client-key-1';
const STATUS_KEY = 'status-key-1';
const MAX_BODY_BYTES = 1024;

/** README "Security": with `gateway.api_keys` set, an unauthenticated caller gets the 401 and nothing else. */
describe('unauthenticated callers get nothing but the 401', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
    const yaml = `${fleetYaml({ apiKeys: [KEY], maxBodyBytes: MAX_BODY_BYTES })}status:\n  api_keys: ["${STATUS_KEY}"]\n`;
    gateway = await startTestGateway(yaml, { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' }, undefined, {
      gatewayServer: true,
    });
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  /** The head of a POST of `length` declared bytes to `path`, with `extra` header lines. */
  const head = (path: string, length: number, extra: string[] = []) =>
    [
      `POST ${path} HTTP/1.1`,
      'Host: x',
      'Content-Type: application/json',
      `Content-Length: ${length}`,
      ...extra,
      '',
      '',
    ].join('\r\n');

  const errorCode = (body: string) => (JSON.parse(body) as { error: { code: string } }).error.code;

  const COMPLETIONS = ['/v1/chat/completions', '/v1/responses', '/v1/embeddings'];
  const WRONG = [
    ['no key', []],
    ['a wrong key', ['Authorization: Bearer nope']],
    ['the status key', [`Authorization: Bearer ${STATUS_KEY}`]],
  ] as const;

  describe('Expect: 100-continue', () => {
    it.each(
      COMPLETIONS.flatMap((path) =>
        WRONG.flatMap(([who, auth]) => [10, 99_999_999].map((n) => [path, who, n, auth] as const)),
      ),
    )(
      '%s with %s, Content-Length %s: the 401 instead of 100 Continue, and the connection closed with the body never asked for',
      async (path, _who, length, auth) => {
        // Only the head is sent: the server must answer and close without waiting for a body byte.
        const res = await rawExchange(gateway.url, [head(path, length, ['Expect: 100-continue', ...auth])], {
          timeoutMs: 3000,
        });
        expect(res.text).not.toContain('100 Continue');
        expect(res.status).toBe(401);
        expect(res.headers['www-authenticate']).toBe('Bearer');
        expect(res.headers['connection']).toBe('close');
        expect(res.headers['x-request-id']).toBeTruthy();
        expect(errorCode(res.body)).toBe('invalid_api_key');
        expect(res.body).not.toMatch(/max_body_bytes|\/v1\/models/);
      },
    );

    it('/status with no status key: its own 401 (Basic) instead of 100 Continue', async () => {
      const res = await rawExchange(gateway.url, [head('/status', 10, ['Expect: 100-continue'])], { timeoutMs: 3000 });
      expect(res.text).not.toContain('100 Continue');
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Basic /);
      expect(res.body).toContain('status.api_keys');
    });

    it('the neighbours: with the key, an oversized upload is the 413 and a small one is continued and served', async () => {
      const big = await rawExchange(
        gateway.url,
        [head('/v1/chat/completions', 99_999_999, ['Expect: 100-continue', `Authorization: Bearer ${KEY}`])],
        { timeoutMs: 3000 },
      );
      expect(big.text).not.toContain('100 Continue');
      expect(big.status).toBe(413);
      expect(errorCode(big.body)).toBe('request_too_large');

      const body = JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'x' }] });
      const small = await rawExchange(
        gateway.url,
        [
          head('/v1/chat/completions', body.length, [
            'Expect: 100-continue',
            `Authorization: Bearer ${KEY}`,
            'Connection: close',
          ]),
          body,
        ],
        { gapMs: 200, timeoutMs: 5000 },
      );
      expect(small.text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    });
  });

  describe('a body over max_body_bytes', () => {
    it.each(COMPLETIONS)('%s with Content-Length 99999999 and no key: 401, not 413', async (path) => {
      const res = await rawExchange(gateway.url, [head(path, 99_999_999)], { timeoutMs: 5000 });
      expect(res.status).toBe(401);
      expect(errorCode(res.body)).toBe('invalid_api_key');
      expect(res.body).not.toContain('max_body_bytes');
    });

    it.each(COMPLETIONS)('%s with a real body over the limit and a wrong key: 401, not 413 (fetch)', async (path) => {
      const res = await fetch(`${gateway.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer nope' },
        body: JSON.stringify({ model: 'small', input: 'x'.repeat(4 * MAX_BODY_BYTES) }),
      });
      expect(res.status).toBe(401);
      expect(errorCode(await res.text())).toBe('invalid_api_key');
    });
  });

  describe('paths outside the served ones', () => {
    const PATHS = ['/x', '//v1/models', '/./v1/models', '/v1/nope', '/status/x', '*'];
    const raw = (method: string, path: string, auth: string[] = []) =>
      rawExchange(
        gateway.url,
        [[`${method} ${path} HTTP/1.1`, 'Host: x', 'Connection: close', ...auth, '', ''].join('\r\n')],
        {
          timeoutMs: 3000,
        },
      );

    it.each(PATHS.flatMap((p) => ['GET', 'POST', 'OPTIONS'].map((m) => [m, p] as const)))(
      '%s %s without a key: 401, no list of endpoints',
      async (method, path) => {
        const res = await raw(method, path);
        expect(res.status).toBe(401);
        expect(res.headers['www-authenticate']).toBe('Bearer');
        expect(errorCode(res.body)).toBe('invalid_api_key');
        expect(res.body).not.toContain('/v1/chat/completions');
      },
    );

    it.each(PATHS.filter((p) => p !== '*'))('GET %s with the key: the 404 that lists the endpoints', async (path) => {
      const res = await raw('GET', path, [`Authorization: Bearer ${KEY}`]);
      expect(res.status).toBe(404);
      expect(errorCode(res.body)).toBe('not_found');
    });

    it('the probes stay open; /status and /metrics keep the status key', async () => {
      for (const path of ['/healthz', '/readyz']) expect((await fetch(`${gateway.url}${path}`)).status).toBe(200);
      for (const path of ['/status', '/metrics']) {
        const refused = await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${KEY}` } });
        expect(refused.status).toBe(401);
        expect(refused.headers.get('www-authenticate')).toMatch(/^Basic /);
        const ok = await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${STATUS_KEY}` } });
        expect(ok.status).toBe(200);
      }
    });
  });
});
