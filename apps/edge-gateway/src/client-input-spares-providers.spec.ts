import { LeaseKeys, MemoryHealthStore, RedisHealthStore } from '@iop/dispatch';
import { scanKeys, startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, fleetYaml } from '@iop/fake-upstream';
import type { StatusSnapshot } from '@iop/status';
import { Redis } from 'ioredis';
import type { AdapterFactory } from './adapters/adapter';
import { createAdapter } from './adapters/adapter-registry';
import { MAX_BODY_DEPTH } from './http/json-depth';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/** Arrays or objects nested `depth` levels deep, as JSON text (built as text: a test must not overflow either). */
const nested = (shape: 'arrays' | 'objects', depth: number) =>
  shape === 'arrays' ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

/** The body: a chat or Responses request whose unknown field `extra` holds `deep` (JSON text). */
function bodyWith(endpoint: 'chat' | 'responses', model: string, stream: boolean, deep: string): string {
  const head = endpoint === 'chat' ? `"messages":[{"role":"user","content":"x"}]` : `"input":"x"`;
  return `{"model":${JSON.stringify(model)},${head},"stream":${stream},"extra":${deep}}`;
}

const PATH = { chat: '/v1/chat/completions', responses: '/v1/responses' } as const;

async function post(gateway: TestGateway, path: string, body: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${gateway.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  return { status: res.status, text: await res.text() };
}

/** Asserts the OpenAI-shaped 400 of a body nested too deep, naming the top-level field that holds it. */
function expectTooDeep(res: { status: number; text: string }, param: string): void {
  expect(res.status).toBe(400);
  const body = JSON.parse(res.text) as { error: Record<string, unknown> };
  expect(Object.keys(body)).toEqual(['error']);
  expect(body.error).toEqual({
    message: expect.stringContaining(`${MAX_BODY_DEPTH} levels`),
    type: 'invalid_request_error',
    param,
    code: 'invalid_request_error',
  });
  expect(body.error.message).not.toMatch(/\n\s+at |Maximum call stack/);
}

const states = async (gateway: TestGateway) =>
  ((await (await fetch(`${gateway.url}/status`)).json()) as StatusSnapshot).nodes.flatMap((n) =>
    n.resources.map((r) => [r.id, r.state]),
  );

/** Two providers of model `m` (vllm `first`, openai_compat `second`); one failure is enough to turn a provider unhealthy. */
const twoProviders = () => `
version: 1
health: { interval_ms: 60000, unhealthy_after: 1, healthy_after: 2 }
nodes:
  - id: n
    adapters:
      - { id: a, type: vllm, base_url: "\${FIRST}" }
      - { id: b, type: openai_compat, base_url: "\${SECOND}" }
    providers:
      - { id: first, category: vllm, adapter: a, models: [m], max_concurrency: 1 }
      - { id: second, category: openai_compat, adapter: b, models: [m], max_concurrency: 1 }
`;

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

describe('only what an upstream did counts against a provider', () => {
  let first: FakeUpstream;
  let second: FakeUpstream;
  beforeAll(async () => {
    [first, second] = await Promise.all([startFakeUpstream({ name: 'first' }), startFakeUpstream({ name: 'second' })]);
  });
  afterAll(async () => {
    await Promise.all([first.close(), second.close()]);
  });

  it('a fault in the gateway itself is a 500 internal_error: no stack, not booked, no failover, lease released', async () => {
    let calls = 0;
    // Stands in for a bug in the gateway's own code on the way to the upstream (e.g. a serialisation that overflows).
    const faulty: AdapterFactory = (config) => {
      const real = createAdapter(config);
      const fail = async (): Promise<never> => {
        calls++;
        throw new RangeError('Maximum call stack size exceeded');
      };
      return { type: real.type, chat: fail, responses: fail, close: () => real.close() };
    };
    const health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1 }));
    const gateway = await startTestGateway(twoProviders(), { FIRST: first.url, SECOND: second.url }, undefined, {
      health,
      adapterFactory: faulty,
    });
    try {
      first.reset();
      second.reset();
      for (const [endpoint, body] of [
        ['chat', bodyWith('chat', 'm', false, '1')],
        ['responses', bodyWith('responses', 'm', true, '1')],
      ] as const) {
        const before = calls;
        const res = await post(gateway, PATH[endpoint], body);
        expect(res.status).toBe(500);
        expect(JSON.parse(res.text)).toEqual({
          error: {
            message: 'The gateway failed to handle the request; see its logs.',
            type: 'server_error',
            param: null,
            code: 'internal_error',
          },
        });
        expect(calls - before).toBe(1); // no failover to the sibling
      }
      expect([...health.unhealthy()]).toEqual([]);
      expect(await states(gateway)).toEqual([
        ['first', 'ready'],
        ['second', 'ready'],
      ]);
      const counts = await gateway.queue.counts(['first', 'second']);
      expect([counts.get('first'), counts.get('second')]).toEqual([
        { inFlight: 0, queued: 0 },
        { inFlight: 0, queued: 0 },
      ]);
      expect(first.stats().total + second.stats().total).toBe(0);
    } finally {
      await gateway.close();
    }
  });

  it('an upstream that resets the stream before its first byte is a 502, booked, and fails over once', async () => {
    const health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1 }));
    const gateway = await startTestGateway(twoProviders(), { FIRST: first.url, SECOND: second.url }, undefined, {
      health,
    });
    try {
      first.reset();
      second.reset();
      // Both upstreams flush their headers and destroy the socket before any event (the knob is in the body).
      const res = await post(
        gateway,
        PATH.chat,
        JSON.stringify({
          model: 'm',
          messages: [{ role: 'user', content: 'x' }],
          stream: true,
          fake: { cut_after: 0 },
        }),
      );
      expect(res.status).toBe(502);
      expect((JSON.parse(res.text) as { error: { code: string } }).error.code).toBe('upstream_error');
      expect([first.stats().total, second.stats().total]).toEqual([1, 1]);
      expect([...health.unhealthy()].sort()).toEqual(['first', 'second']);
    } finally {
      await gateway.close();
    }
  });

  it("a client's 4xx from the upstream is passed on, not booked, not retried", async () => {
    const health = new MemoryHealthStore(() => ({ unhealthy_after: 1, healthy_after: 1 }));
    const gateway = await startTestGateway(twoProviders(), { FIRST: first.url, SECOND: second.url }, undefined, {
      health,
    });
    try {
      first.reset();
      second.reset();
      const res = await post(
        gateway,
        PATH.chat,
        JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], fake: { status: 400 } }),
      );
      expect(res.status).toBe(400);
      expect(first.stats().total + second.stats().total).toBe(1);
      expect([...health.unhealthy()]).toEqual([]);
    } finally {
      await gateway.close();
    }
  });
});

describe('client input never marks a provider unhealthy in the Redis health store shared by replicas', () => {
  let redis: TestRedis;
  let first: FakeUpstream;
  let second: FakeUpstream;
  beforeAll(async () => {
    [redis, first, second] = await Promise.all([
      startRedis(),
      startFakeUpstream({ name: 'first' }),
      startFakeUpstream({ name: 'second' }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([redis.stop(), first.close(), second.close()]);
  });

  /** A fail-fast connection, as the gateway's own, once ready. */
  async function connect(): Promise<Redis> {
    const conn = new Redis(redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    await new Promise((resolve, reject) => conn.once('ready', resolve).once('error', reject));
    return conn;
  }

  it('books nothing for deep bodies sent to one replica, while an upstream 5xx is seen by both', async () => {
    const prefix = uniquePrefix('deep-health');
    const keys = new LeaseKeys(prefix);
    const healthKeys = () => scanKeys(redis.url, keys.healthKey(''));
    const settings = () => ({ unhealthy_after: 1, healthy_after: 2 });
    const [connA, connB] = await Promise.all([connect(), connect()]);
    const storeA = new RedisHealthStore(connA, prefix, settings, () => 60_000);
    const storeB = new RedisHealthStore(connB, prefix, settings, () => 60_000);
    const env = { FIRST: first.url, SECOND: second.url };
    const [a, b] = await Promise.all([
      startTestGateway(twoProviders(), env, undefined, { health: storeA }),
      startTestGateway(twoProviders(), env, undefined, { health: storeB }),
    ]);
    try {
      for (const endpoint of ['chat', 'responses'] as const) {
        for (const stream of [false, true]) {
          for (const shape of ['arrays', 'objects'] as const) {
            expectTooDeep(
              await post(a, PATH[endpoint], bodyWith(endpoint, 'm', stream, nested(shape, 10_000))),
              'extra',
            );
          }
        }
      }
      expect(await healthKeys()).toEqual([]);
      await storeB.refresh(['first', 'second']);
      expect(await states(b)).toEqual([
        ['first', 'ready'],
        ['second', 'ready'],
      ]);
      expect(
        (await post(b, PATH.chat, JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }))).status,
      ).toBe(200);

      // The control: what an upstream did is booked in Redis (one failure each, the first ever:
      // replica A's commands reach Redis in order, so a booking of the deep bodies would show
      // here as a longer run), and the other replica sees it.
      const failed = await post(
        a,
        PATH.chat,
        JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], fake: { status: 500 } }),
      );
      expect(failed.status).toBe(502);
      const failures = async (id: string) =>
        String(
          (JSON.parse((await connB.hget(keys.healthKey(id), 'rec')) ?? '{}') as { requestFailures?: number })
            .requestFailures,
        );
      await waitUntil(async () => (await healthKeys()).length === 2, 5000, 'both failures to be booked');
      expect([await failures('first'), await failures('second')]).toEqual(['1', '1']);
      await storeB.refresh(['first', 'second']);
      expect(await states(b)).toEqual([
        ['first', 'unhealthy'],
        ['second', 'unhealthy'],
      ]);
    } finally {
      await Promise.all([a.close(), b.close()]);
      connA.disconnect();
      connB.disconnect();
    }
  });
});
