import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runRoute, type GatewayHandler, type GatewayRequest, type GatewayResponse } from './http/gateway-handler';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/**
 * The completions run without express when their path is exact, and through express's routes for any
 * other spelling (docs/architecture.md, "Request path"): both must answer alike, successes and errors.
 */
const yaml = `
version: 1
gateway:
  api_keys: [k1]
  cors: { allowed_origins: ["https://app.example"] }
nodes:
  - id: n
    adapters:
      - { id: a, type: openai_compat, base_url: "\${UP}" }
    providers:
      - { id: p, category: openai_compat, adapter: a, models: [m], max_concurrency: 4 }
`;

const chat = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
const embeddings = JSON.stringify({ model: 'm', input: 'hi' });

/** The parts of an answer that must not depend on which path served it. */
async function answer(url: string, init: RequestInit) {
  const res = await fetch(url, init);
  const text = await res.text();
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    contentLength: res.headers.get('content-length'),
    hasRequestId: (res.headers.get('x-request-id') ?? '') !== '',
    vary: res.headers.get('vary'),
    allowOrigin: res.headers.get('access-control-allow-origin'),
    retryAfter: res.headers.get('retry-after'),
    wwwAuthenticate: res.headers.get('www-authenticate'),
    error: res.status >= 400 ? (JSON.parse(text) as { error: { code: string; type: string } }).error : undefined,
    object: res.status < 400 && text.startsWith('{') ? (JSON.parse(text) as { object?: string }).object : undefined,
  };
}

describe('completion paths: exact paths without express and other spellings through it answer alike', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  beforeAll(async () => {
    upstream = await startFakeUpstream({ name: 'up' });
    gateway = await startTestGateway(yaml, { UP: upstream.url });
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  const json = { 'content-type': 'application/json', authorization: 'Bearer k1' };
  const cases: Array<[string, string, RequestInit]> = [
    ['a chat completion', '/v1/chat/completions', { method: 'POST', headers: json, body: chat }],
    ['an embedding', '/v1/embeddings', { method: 'POST', headers: json, body: embeddings }],
    [
      'a request from an allowed origin',
      '/v1/chat/completions',
      { method: 'POST', headers: { ...json, origin: 'https://app.example' }, body: chat },
    ],
    [
      'no key (401)',
      '/v1/chat/completions',
      { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat },
    ],
    ['a body that is not JSON (400)', '/v1/chat/completions', { method: 'POST', headers: json, body: '{"model":' }],
    [
      'a text/plain body (415)',
      '/v1/responses',
      { method: 'POST', headers: { ...json, 'content-type': 'text/plain' }, body: chat },
    ],
    [
      'an unknown model (404)',
      '/v1/chat/completions',
      { method: 'POST', headers: json, body: chat.replace('"m"', '"nope"') },
    ],
    [
      'an invalid body (400 from the schema, thrown in the endpoint)',
      '/v1/chat/completions',
      { method: 'POST', headers: json, body: '{"model":"m","messages":"hi"}' },
    ],
  ];

  it.each(cases)('%s', async (_what, path, init) => {
    const exact = await answer(`${gateway.url}${path}`, init);
    expect(exact.status).toBeGreaterThan(0);
    for (const other of [`${path}/`, path.toUpperCase(), `${path}?trace=1`]) {
      expect({ other, ...(await answer(`${gateway.url}${other}`, init)) }).toEqual({ other, ...exact });
    }
  });

  it('a success is served on the exact path, with the request context filled in', async () => {
    const res = await answer(`${gateway.url}/v1/chat/completions`, cases[0][2]);
    expect(res).toMatchObject({ status: 200, object: 'chat.completion', hasRequestId: true });
  });
});

describe('runRoute: steps in order, and every kind of failure answered once by the error handler', () => {
  let server: Server;
  let url: string;
  let handle: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;
  beforeAll(async () => {
    server = createServer((req, res) => handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const errors: unknown[] = [];
  const onError = (err: unknown, _req: GatewayRequest, res: GatewayResponse) => {
    errors.push(err);
    res.statusCode = 500;
    res.end(String((err as Error).message));
  };
  const serve = (steps: GatewayHandler[], endpoint: (req: GatewayRequest, res: GatewayResponse) => unknown) => {
    errors.length = 0;
    handle = (req, res) => runRoute(steps, endpoint, onError, req as GatewayRequest, res as GatewayResponse);
  };
  const mark =
    (name: string): GatewayHandler =>
    (_req, res, next) => {
      res.locals.model = `${res.locals.model ?? ''}${name}`;
      next();
    };

  it('runs the steps in order, then the endpoint, with fresh locals per request', async () => {
    serve([mark('a'), mark('b')], (_req, res) => res.end(res.locals.model));
    expect(await (await fetch(url)).text()).toBe('ab');
    expect(await (await fetch(url)).text()).toBe('ab');
  });

  it.each<[string, GatewayHandler]>([
    ['next(err)', (_req, _res, next) => next(new Error('refused'))],
    [
      'a throw',
      () => {
        throw new Error('refused');
      },
    ],
    [
      'a rejected promise',
      async () => {
        throw new Error('refused');
      },
    ],
    [
      'next(err) after an await',
      async (_req, _res, next) => {
        await Promise.resolve();
        next(new Error('refused'));
      },
    ],
  ])('%s in a step skips the rest and is answered once', async (_what, step) => {
    let reached = false;
    serve([mark('a'), step, mark('c')], (_req, res) => {
      reached = true;
      res.end();
    });
    const res = await fetch(url);
    expect([res.status, await res.text()]).toEqual([500, 'refused']);
    expect(reached).toBe(false);
    expect(errors).toHaveLength(1);
  });

  it('a rejected endpoint is answered by the error handler', async () => {
    serve([mark('a')], async () => {
      throw new Error('endpoint failed');
    });
    const res = await fetch(url);
    expect([res.status, await res.text()]).toEqual([500, 'endpoint failed']);
  });

  it('a second failure of the same request is not answered again', async () => {
    serve(
      [
        (_req, _res, next) => {
          next(new Error('first'));
          next(new Error('second'));
        },
      ],
      (_req, res) => res.end(),
    );
    const res = await fetch(url);
    expect([res.status, await res.text()]).toEqual([500, 'first']);
    expect(errors).toHaveLength(1);
  });
});
