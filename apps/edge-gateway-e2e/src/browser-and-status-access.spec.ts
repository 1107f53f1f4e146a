import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { spawnGateway, writeTempConfig, type GatewayProcess } from './testing/gateway-process';

/**
 * README "Security", on real gateway processes: completions need `application/json` (415
 * otherwise); cross-origin browser access only for `gateway.cors.allowed_origins`;
 * `status.api_keys` guard `/status` and `/metrics` while probes stay open;
 * `gateway.topology_headers: false` drops `x-iop-node` / `x-iop-resource`; `GET /v1/models/{id}`
 * checks the key before it reads the path.
 */
const CLIENT_KEY = 'sk-client-0001';
const STATUS_KEY = 'status-key-0001';
const ALLOWED = 'https://chat.example.com';

const hardenedYaml = () =>
  fleetYaml({ apiKeys: [CLIENT_KEY] })
    .replace('gateway:\n', `gateway:\n  topology_headers: false\n  cors: { allowed_origins: ["${ALLOWED}"] }\n`)
    .replace('queue:\n', `status: { api_keys: ["${STATUS_KEY}"] }\nqueue:\n`);

const chatBody = (model: string) => JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }] });
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

async function errorOf(res: Response): Promise<{ message: string; type: string; param: string | null; code: string }> {
  const body = (await res.json()) as { error: { message: string; type: string; param: string | null; code: string } };
  return body.error;
}

describe('browser and status access (README "Security")', () => {
  let upstream: FakeUpstream;
  let hardened: GatewayProcess;
  let defaults: GatewayProcess;
  const env = () => ({ UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' });

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    [hardened, defaults] = await Promise.all([
      spawnGateway(writeTempConfig(hardenedYaml()), { env: env() }),
      spawnGateway(writeTempConfig(fleetYaml()), { env: env() }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([hardened?.stop(), defaults?.stop()]);
    await upstream.close();
  });

  const post = (gateway: GatewayProcess, path: string, body: string, headers: Record<string, string>) =>
    fetch(`${gateway.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, ...headers },
      body,
    });

  describe('completions require Content-Type: application/json', () => {
    it.each([
      ['text/plain (a browser form or fetch without preflight)', { 'content-type': 'text/plain;charset=UTF-8' }],
      ['application/x-www-form-urlencoded', { 'content-type': 'application/x-www-form-urlencoded' }],
      ['multipart/form-data', { 'content-type': 'multipart/form-data; boundary=x' }],
      ['application/jsonp', { 'content-type': 'application/jsonp' }],
      ['none', {}],
    ])('%s is a 415 and reaches no model', async (_what, headers) => {
      upstream.reset();
      for (const [path, body] of [
        ['/v1/chat/completions', chatBody('small')],
        ['/v1/responses', JSON.stringify({ model: 'echo', input: 'x' })],
      ]) {
        const res = await post(defaults, path, body, headers);
        expect(res.status).toBe(415);
        expect(await errorOf(res)).toMatchObject({
          code: 'unsupported_media_type',
          type: 'invalid_request_error',
          message: expect.stringContaining('application/json'),
        });
      }
      expect(upstream.stats().total).toBe(0);
    });

    it('accepts application/json with a charset, in any case', async () => {
      const res = await post(defaults, '/v1/chat/completions', chatBody('small'), {
        'content-type': 'Application/JSON; charset=utf-8',
      });
      expect(res.status).toBe(200);
    });

    it('checks the client key first', async () => {
      const res = await fetch(`${hardened.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'text/plain' },
        body: chatBody('small'),
      });
      expect(res.status).toBe(401);
    });
  });

  describe('CORS: only listed origins', () => {
    const preflight = (gateway: GatewayProcess, origin: string) =>
      fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization, content-type, x-stainless-os',
        },
      });

    it('answers the preflight of a listed origin with the methods and headers it asked for', async () => {
      const res = await preflight(hardened, ALLOWED);
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe(ALLOWED);
      expect(res.headers.get('access-control-allow-methods')).toBe('GET, POST');
      expect(res.headers.get('access-control-allow-headers')).toBe('authorization, content-type, x-stainless-os');
      expect(res.headers.get('vary')).toMatch(/origin/i);
    });

    it('lets a listed origin read the answer of a JSON request', async () => {
      const res = await post(hardened, '/v1/chat/completions', chatBody('small'), {
        'content-type': 'application/json',
        origin: ALLOWED,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    });

    it.each([
      ['another origin, with origins listed', 'hardened', 'https://evil.example'],
      ['a listed origin on another port', 'hardened', 'https://chat.example.com:8443'],
      ['any origin with the default empty list', 'defaults', ALLOWED],
      ['the "null" origin of a sandboxed page', 'defaults', 'null'],
    ] as const)(
      'refuses the preflight of %s (403) and sets no CORS header on its requests',
      async (_what, which, origin) => {
        const gateway = which === 'hardened' ? hardened : defaults;
        const res = await preflight(gateway, origin);
        expect(res.status).toBe(403);
        expect(await errorOf(res)).toMatchObject({ code: 'origin_not_allowed' });
        expect(res.headers.get('access-control-allow-origin')).toBeNull();
        const models = await fetch(`${gateway.url}/v1/models`, {
          headers: { origin, authorization: `Bearer ${CLIENT_KEY}` },
        });
        expect(models.headers.get('access-control-allow-origin')).toBeNull();
        const simple = await post(gateway, '/v1/chat/completions', chatBody('small'), {
          'content-type': 'text/plain',
          origin,
        });
        expect(simple.status).toBe(415);
        expect(simple.headers.get('access-control-allow-origin')).toBeNull();
      },
    );
  });

  describe('status keys', () => {
    it.each(['/status', '/metrics'])(
      '%s needs a status key: 401 with a Basic challenge, then Bearer or Basic',
      async (path) => {
        const none = await fetch(`${hardened.url}${path}`);
        expect(none.status).toBe(401);
        expect(none.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
        expect(await errorOf(none)).toMatchObject({
          code: 'invalid_api_key',
          message: expect.stringContaining('status.api_keys'),
        });
        expect(
          (await fetch(`${hardened.url}${path}`, { headers: { authorization: `Bearer ${CLIENT_KEY}` } })).status,
        ).toBe(401);
        expect(
          (await fetch(`${hardened.url}${path}`, { headers: { authorization: 'Bearer status-key-0002' } })).status,
        ).toBe(401);
        expect(
          (await fetch(`${hardened.url}${path}`, { headers: { authorization: `Bearer ${STATUS_KEY}` } })).status,
        ).toBe(200);
        expect(
          (await fetch(`${hardened.url}${path}`, { headers: { authorization: basic('prometheus', STATUS_KEY) } }))
            .status,
        ).toBe(200);
        expect(
          (await fetch(`${hardened.url}${path}`, { headers: { authorization: basic(STATUS_KEY, 'wrong') } })).status,
        ).toBe(401);
      },
    );

    it.each(['/healthz', '/readyz'])('%s stays open for probes', async (path) => {
      expect((await fetch(`${hardened.url}${path}`)).status).toBe(200);
    });

    it('without status keys, /status and /metrics stay open', async () => {
      expect((await fetch(`${defaults.url}/status`)).status).toBe(200);
      expect((await fetch(`${defaults.url}/metrics`)).status).toBe(200);
    });
  });

  describe('topology headers', () => {
    it.each([
      ['a pooled answer', 'small', 200],
      ['a CLI answer', 'echo', 200],
      ['a legacy route', 'legacy', 200],
    ])(
      '%s carries no x-iop-node / x-iop-resource with topology_headers: false, and both by default',
      async (_what, model, status) => {
        const quiet = await post(hardened, '/v1/chat/completions', chatBody(model), {
          'content-type': 'application/json',
        });
        expect(quiet.status).toBe(status);
        expect(quiet.headers.get('x-iop-node')).toBeNull();
        expect(quiet.headers.get('x-iop-resource')).toBeNull();
        await quiet.text();
        const loud = await post(defaults, '/v1/chat/completions', chatBody(model), {
          'content-type': 'application/json',
        });
        expect(loud.headers.get('x-iop-node')).not.toBeNull();
        expect(loud.headers.get('x-iop-resource')).not.toBeNull();
        await loud.text();
      },
    );

    it('an upstream error carries none either', async () => {
      const res = await post(
        hardened,
        '/v1/chat/completions',
        JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'x' }], fake: { status: 500 } }),
        { 'content-type': 'application/json' },
      );
      expect(res.status).toBe(502);
      expect(res.headers.get('x-iop-node')).toBeNull();
      expect(res.headers.get('x-iop-resource')).toBeNull();
    });
  });

  describe('GET /v1/models/{id}', () => {
    it('checks the key before it reads a malformed path', async () => {
      expect((await fetch(`${hardened.url}/v1/models/%zz`)).status).toBe(401);
      const res = await fetch(`${hardened.url}/v1/models/%zz`, { headers: { authorization: `Bearer ${CLIENT_KEY}` } });
      expect(res.status).toBe(400);
      expect(await errorOf(res)).toMatchObject({
        code: 'invalid_request_error',
        param: 'model',
        message: expect.stringContaining('/v1/models/%zz'),
      });
    });

    it('answers a known model, a percent-encoded one and an unknown one', async () => {
      const auth = { authorization: `Bearer ${CLIENT_KEY}` };
      expect(await (await fetch(`${hardened.url}/v1/models/llama`, { headers: auth })).json()).toMatchObject({
        id: 'llama',
        object: 'model',
      });
      expect((await fetch(`${hardened.url}/v1/models/ll%61ma`, { headers: auth })).status).toBe(200);
      const unknown = await fetch(`${hardened.url}/v1/models/meta%2Fnope`, { headers: auth });
      expect(unknown.status).toBe(404);
      expect(await errorOf(unknown)).toMatchObject({ code: 'model_not_found' });
    });
  });
});
