import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

describe('bad input gets an OpenAI-shaped error with the right status and code', () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  const key = 'sk-client-key';

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await startTestGateway(fleetYaml({ apiKeys: [key], maxBodyBytes: 2048 }), {
      UPSTREAM: upstream.url,
      UPSTREAM_KEY: 'k',
    });
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  // Long, yet within this file's max_body_bytes (2048).
  const long = 'm'.repeat(1500);
  const post = (body: string, headers: Record<string, string> = { authorization: `Bearer ${key}` }) =>
    fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
    });

  async function expectError(res: Response, status: number, code: string, param?: string) {
    expect(res.status).toBe(status);
    const body = (await res.json()) as { error: { message: string; type: string; param: string | null; code: string } };
    expect(body.error.code).toBe(code);
    expect(typeof body.error.message).toBe('string');
    expect(body.error.message).not.toMatch(/\n\s+at /); // never a stack trace
    if (param !== undefined) expect(body.error.param).toBe(param);
  }

  it.each([
    ['invalid JSON', '{"model": "llama", ', 400, 'invalid_request_error', undefined],
    [
      'a missing model',
      JSON.stringify({ messages: [{ role: 'user', content: 'x' }] }),
      400,
      'invalid_request_error',
      'model',
    ],
    [
      'messages of the wrong type',
      JSON.stringify({ model: 'llama', messages: 'hello' }),
      400,
      'invalid_request_error',
      'messages',
    ],
    [
      'a message without a role',
      JSON.stringify({ model: 'llama', messages: [{ content: 'x' }] }),
      400,
      'invalid_request_error',
      'messages[0].role',
    ],
    ['a body that is not an object', '[1,2]', 400, 'invalid_request_error', undefined],
    [
      'a body nested deeper than MAX_BODY_DEPTH',
      `{"model":"llama","messages":[{"role":"user","content":"x"}],"extra":${'['.repeat(500)}${']'.repeat(500)}}`,
      400,
      'invalid_request_error',
      'extra',
    ],
    [
      'an unknown model',
      JSON.stringify({ model: 'gpt-nope', messages: [{ role: 'user', content: 'x' }] }),
      404,
      'model_not_found',
      'model',
    ],
    [
      'a body over max_body_bytes',
      JSON.stringify({ model: 'llama', messages: [{ role: 'user', content: 'x'.repeat(4096) }] }),
      413,
      'request_too_large',
      undefined,
    ],
  ])('answers %s with %i %s', async (_what, body, status, code, param) => {
    await expectError(await post(body), status, code, param);
  });

  // What the gateway weighs a request by must mean one thing to it and to the upstream (README "Token
  // budgets: what a client sees"): a count that is not a whole number is refused, not forwarded.
  it.each([
    ['/v1/chat/completions', { max_tokens: -1 }, 'max_tokens'],
    ['/v1/chat/completions', { max_tokens: 5.5 }, 'max_tokens'],
    ['/v1/chat/completions', { max_tokens: '1e5' }, 'max_tokens'],
    ['/v1/chat/completions', { max_completion_tokens: -3 }, 'max_completion_tokens'],
    ['/v1/chat/completions', { n: 0 }, 'n'],
    ['/v1/chat/completions', { n: { many: true } }, 'n'],
    ['/v1/responses', { max_output_tokens: -1 }, 'max_output_tokens'],
    ['/v1/responses', { max_output_tokens: 'lots' }, 'max_output_tokens'],
  ])('answers %s with %p with 400 naming the field', async (path, fields, param) => {
    const base = path.endsWith('responses')
      ? { model: 'llama', input: 'hi' }
      : { model: 'llama', messages: [{ role: 'user', content: 'hi' }] };
    const res = await fetch(`${gateway.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ ...base, ...fields }),
    });
    await expectError(res, 400, 'invalid_request_error', param);
  });

  it.each([[{ max_tokens: 16, n: 2 }], [{ max_tokens: null, max_completion_tokens: '32' }]])(
    'serves %p: whole numbers, digits and null are counts',
    async (fields) => {
      const res = await post(
        JSON.stringify({ model: 'llama', messages: [{ role: 'user', content: 'hi' }], ...fields }),
      );
      expect(res.status).toBe(200);
      await res.text();
    },
  );

  it('answers a model of the wrong type with 400 naming model', async () => {
    const res = await post(JSON.stringify({ model: 5, messages: [{ role: 'user', content: 'x' }] }));
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string; param: string } }).error).toMatchObject({
      param: 'model',
      message: expect.stringContaining('must be a string'),
    });
  });

  it('answers a corrupt compressed body with 400, not 500', async () => {
    await expectError(
      await post('{"model":"llama"}', { authorization: `Bearer ${key}`, 'content-encoding': 'gzip' }),
      400,
      'invalid_request_error',
    );
  });

  it('answers a known path with the wrong method with 405 and Allow', async () => {
    const res = await fetch(`${gateway.url}/v1/chat/completions`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.headers.get('allow')).toBe('POST');
    await expectError(res, 405, 'method_not_allowed');
  });

  it.each([
    ['a chat completion', () => post(JSON.stringify({ model: long, messages: [{ role: 'user', content: 'x' }] }))],
    [
      'GET /v1/models/{id}',
      () => fetch(`${gateway.url}/v1/models/${long}`, { headers: { authorization: `Bearer ${key}` } }),
    ],
  ])('echoes at most 200 characters of an unknown 1500-character model id (%s)', async (_what, send) => {
    const res = await send();
    expect(res.status).toBe(404);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('model_not_found');
    expect(error.message).toContain(`"${'m'.repeat(200)}…(1300 more characters)"`);
    expect(error.message.length).toBeLessThan(400);
  });

  it('echoes at most 200 characters of an unknown long path', async () => {
    const res = await fetch(`${gateway.url}/v1/${'p'.repeat(5000)}`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(404);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error).toMatchObject({ code: 'not_found', message: expect.stringContaining('…(4804 more characters)') });
    expect(error.message.length).toBeLessThan(500);
  });

  it('answers a missing API key with 401 invalid_api_key', async () => {
    await expectError(await post(JSON.stringify({ model: 'llama', messages: [] }), {}), 401, 'invalid_api_key');
  });

  it('answers a wrong API key with 401 invalid_api_key', async () => {
    await expectError(await post('{}', { authorization: 'Bearer sk-wrong' }), 401, 'invalid_api_key');
  });

  it('answers an unknown path with an OpenAI-shaped 404', async () => {
    const res = await fetch(`${gateway.url}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: '{}',
    });
    await expectError(res, 404, 'not_found');
  });

  it('answers an upstream 5xx before the first byte with 502 upstream_error', async () => {
    const res = await post(
      JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'x' }], fake: { status: 500 } }),
    );
    await expectError(res, 502, 'upstream_error');
  });

  it('answers a silent upstream with 504 upstream_timeout after request_timeout_ms', async () => {
    const slow = await startTestGateway(fleetYaml({ requestTimeoutMs: 200 }), {
      UPSTREAM: upstream.url,
      UPSTREAM_KEY: 'k',
    });
    try {
      const res = await fetch(`${slow.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'x' }], fake: { delay_ms: 5000 } }),
      });
      await expectError(res, 504, 'upstream_timeout');
      expect((await slow.queue.counts(['solo'])).get('solo')).toEqual({ inFlight: 0, queued: 0 });
    } finally {
      await slow.close();
    }
  });
});
