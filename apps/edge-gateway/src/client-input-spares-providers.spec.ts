import { MemoryHealthStore } from '@iop/dispatch';
import { waitUntil } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import { MAX_BODY_DEPTH } from './http/request/json-depth';
import { bodyWith, expectTooDeep, nested, PATH, post, states, twoProviders } from './testing/client-input';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

describe(`a body nested deeper than MAX_BODY_DEPTH (${MAX_BODY_DEPTH}) is a 400 decided before admission, on every route`, () => {
  let upstream: FakeUpstream;
  let gateway: TestGateway;
  // One booked failure would turn a provider unhealthy.
  const health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1 }));

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    gateway = await startTestGateway(fleetYaml(), { UPSTREAM: upstream.url, UPSTREAM_KEY: 'k' }, undefined, { health });
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  const routes = [
    ['llama', 'a vllm + openai_compat pool'],
    ['qwen', 'an ollama pool'],
    ['small', 'an openai_compat pool of one'],
    ['echo', 'a CLI model'],
    ['legacy', 'a legacy route'],
  ] as const;
  const cases = routes.flatMap(([model, what]) =>
    (['chat', 'responses'] as const).flatMap((endpoint) =>
      [false, true].flatMap((stream) =>
        (['arrays', 'objects'] as const).map((shape) => [model, what, endpoint, stream, shape] as const),
      ),
    ),
  );

  it.each(cases)('%s (%s): %s, stream %s, %s nested 10,000 deep', async (model, _what, endpoint, stream, shape) => {
    expectTooDeep(
      await post(gateway, PATH[endpoint], bodyWith(endpoint, model, stream, nested(shape, 10_000))),
      'extra',
    );
    expect(upstream.stats().total).toBe(0);
    expect([...health.unhealthy()]).toEqual([]);
  });

  it.each([
    [
      'chat',
      'inside a message',
      '{"model":"llama","messages":[{"role":"user","content":"x","extra":DEEP}]}',
      'messages',
    ],
    [
      'chat',
      'in a response_format schema',
      '{"model":"llama","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":DEEP}}}',
      'response_format',
    ],
    [
      'chat',
      'in tool parameters',
      '{"model":"echo","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":DEEP}}]}',
      'tools',
    ],
    [
      'responses',
      'inside an input item',
      '{"model":"qwen","input":[{"role":"user","content":"x","extra":DEEP}]}',
      'input',
    ],
    [
      'responses',
      'in a text.format schema',
      '{"model":"qwen","input":"x","text":{"format":{"type":"json_schema","name":"s","schema":DEEP}}}',
      'text',
    ],
  ] as const)(
    '%s: nesting %s is refused too, naming the top-level field',
    async (endpoint, _where, template, param) => {
      for (const shape of ['arrays', 'objects'] as const) {
        expectTooDeep(await post(gateway, PATH[endpoint], template.replace('DEEP', nested(shape, 10_000))), param);
      }
      expect(upstream.stats().total).toBe(0);
    },
  );

  it(`forwards a body exactly ${MAX_BODY_DEPTH} levels deep unchanged, and refuses one level more`, async () => {
    // The body object is level 1, so `extra` may nest MAX_BODY_DEPTH - 1 levels.
    for (const shape of ['arrays', 'objects'] as const) {
      upstream.reset();
      const ok = await post(gateway, PATH.chat, bodyWith('chat', 'small', false, nested(shape, MAX_BODY_DEPTH - 1)));
      expect(ok.status).toBe(200);
      expect(upstream.stats().total).toBe(1);
      expect(JSON.stringify(upstream.stats().lastRequest.small.body)).toContain(nested(shape, MAX_BODY_DEPTH - 1));
      upstream.reset();
      expectTooDeep(
        await post(gateway, PATH.chat, bodyWith('chat', 'small', false, nested(shape, MAX_BODY_DEPTH))),
        'extra',
      );
      expect(upstream.stats().total).toBe(0);
    }
  });

  it.each([
    [
      'chat',
      PATH.chat,
      '{"model":"llama","messages":[{"role":"user","content":"x"}],"max_tokens":1e999}',
      'max_tokens',
    ],
    [
      'chat, CLI model',
      PATH.chat,
      '{"model":"echo","messages":[{"role":"user","content":"x"}],"temperature":-1e400}',
      'temperature',
    ],
    [
      'responses, ollama pool',
      PATH.responses,
      '{"model":"qwen","input":"x","max_output_tokens":1e999}',
      'max_output_tokens',
    ],
    [
      'responses, nested',
      PATH.responses,
      '{"model":"llama","input":[{"role":"user","content":"x","extra":[1e999]}]}',
      'input',
    ],
    ['embeddings', '/v1/embeddings', '{"model":"llama","input":"x","dimensions":1e999}', 'dimensions'],
  ] as const)(
    '%s: a number JSON.parse makes infinite is a 400 naming its field, never forwarded as null',
    async (_what, path, body, param) => {
      const res = await post(gateway, path, body);
      expect(res.status).toBe(400);
      expect((JSON.parse(res.text) as { error: Record<string, unknown> }).error).toEqual({
        message: expect.stringContaining('a number too large for a 64-bit float'),
        type: 'invalid_request_error',
        param,
        code: 'invalid_request_error',
      });
      expect(upstream.stats().total).toBe(0);
      expect([...health.unhealthy()]).toEqual([]);
    },
  );

  it('answers at once while the pool is full: no lease is asked for, nothing is queued', async () => {
    // `small` has one provider with max_concurrency 1: hold its only slot.
    const holder = new AbortController();
    const held = fetch(`${gateway.url}${PATH.chat}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'small', messages: [{ role: 'user', content: 'x' }], fake: { delay_ms: 20_000 } }),
      signal: holder.signal,
    }).catch(() => undefined);
    try {
      await waitUntil(
        async () => (await gateway.queue.counts(['solo'])).get('solo')?.inFlight === 1,
        5000,
        'the slot to be held',
      );
      for (const stream of [false, true]) {
        expectTooDeep(
          await post(gateway, PATH.chat, bodyWith('chat', 'small', stream, nested('arrays', 10_000))),
          'extra',
        );
        expect((await gateway.queue.counts(['solo'])).get('solo')).toEqual({ inFlight: 1, queued: 0 });
      }
    } finally {
      holder.abort();
      await held;
    }
    await waitUntil(
      async () => (await gateway.queue.counts(['solo'])).get('solo')?.inFlight === 0,
      5000,
      'the slot to be free',
    );
  });

  it('leaves every provider ready and serving after all of the above', async () => {
    expect([...health.unhealthy()]).toEqual([]);
    expect((await states(gateway)).filter(([, state]) => state !== 'ready')).toEqual([]);
    for (const model of ['llama', 'qwen', 'small', 'echo', 'legacy']) {
      expect(
        (await post(gateway, PATH.chat, JSON.stringify({ model, messages: [{ role: 'user', content: 'still here' }] })))
          .status,
      ).toBe(200);
    }
  });
});

describe('client input never counts against a provider: a pool of two keeps serving', () => {
  let first: FakeUpstream;
  let second: FakeUpstream;
  let gateway: TestGateway;

  beforeAll(async () => {
    [first, second] = await Promise.all([startFakeUpstream({ name: 'first' }), startFakeUpstream({ name: 'second' })]);
    const health = new MemoryHealthStore(() => gateway.config.health);
    gateway = await startTestGateway(twoProviders(), { FIRST: first.url, SECOND: second.url }, undefined, { health });
  });
  afterAll(async () => {
    await gateway.close();
    await Promise.all([first.close(), second.close()]);
  });

  it('answers a 20 KB body nested 10,000 deep with 400 three times, and both providers stay ready', async () => {
    const body = bodyWith('chat', 'm', false, nested('arrays', 10_000));
    expect(body.length).toBeGreaterThan(20_000);
    for (let i = 0; i < 3; i++) expectTooDeep(await post(gateway, PATH.chat, body), 'extra');
    expect(first.stats().total + second.stats().total).toBe(0);
    expect(await states(gateway)).toEqual([
      ['first', 'ready'],
      ['second', 'ready'],
    ]);
    const served = new Set<string | null>();
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`${gateway.url}${PATH.chat}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(200);
      served.add(res.headers.get('x-iop-resource'));
      await res.text();
    }
    expect(served.size).toBeGreaterThan(0);
  });

  it('stays ready after a burst of deep bodies on both endpoints, stream and not, arrays and objects', async () => {
    const burst = (['chat', 'responses'] as const).flatMap((endpoint) =>
      [false, true].flatMap((stream) =>
        (['arrays', 'objects'] as const).map((shape) =>
          post(gateway, PATH[endpoint], bodyWith(endpoint, 'm', stream, nested(shape, 5_000))),
        ),
      ),
    );
    for (const res of await Promise.all(burst)) expectTooDeep(res, 'extra');
    expect(await states(gateway)).toEqual([
      ['first', 'ready'],
      ['second', 'ready'],
    ]);
    expect((await gateway.queue.counts(['first', 'second'])).get('first')).toEqual({ inFlight: 0, queued: 0 });
    const ok = await post(gateway, PATH.responses, JSON.stringify({ model: 'm', input: 'hi' }));
    expect(ok.status).toBe(200);
  });
});
