import { MemoryHealthStore, RedisHealthStore, type HealthStore } from '@iop/dispatch';
import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { Redis } from 'ioredis';
import type { AdapterFactory } from './adapters/adapter';
import { createAdapter } from './adapters/adapter-registry';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

// A trial held for request_timeout_ms + max_wait_ms = 80 s: a trial not given back stays out for the whole test.
const YAML = `
version: 1
gateway: { request_timeout_ms: 60000 }
queue: { backend: memory, max_wait_ms: 20000 }
health: { interval_ms: 60000, unhealthy_after: 1, healthy_after: 1, cooldown_ms: 200 }
nodes:
  - id: n
    adapters:
      - { id: ol, type: ollama, base_url: "\${UP}" }
      - { id: oc, type: openai_compat, base_url: "\${UP}" }
    providers:
      - { id: olla, category: ollama, adapter: ol, models: [mo], max_concurrency: 2 }
      - { id: compat, category: openai_compat, adapter: oc, models: [mc], max_concurrency: 2 }
`;
const SETTINGS = () => ({ unhealthy_after: 1, healthy_after: 1, cooldown_ms: 200, interval_ms: 60_000 });
const PROVIDER = { mo: 'olla', mc: 'compat' } as const;
type Model = keyof typeof PROVIDER;
type Endpoint = 'chat' | 'responses' | 'embeddings';
const PATHS: Record<Endpoint, string> = {
  chat: '/v1/chat/completions',
  responses: '/v1/responses',
  embeddings: '/v1/embeddings',
};

/** A request body of `endpoint` for `model`, with `extra` fields (the fake upstream's knobs go in `fake`). */
function bodyOf(endpoint: Endpoint, model: Model, stream: boolean, extra: object = {}): string {
  const base =
    endpoint === 'chat'
      ? { messages: [{ role: 'user', content: 'x' }], stream }
      : endpoint === 'responses'
        ? { input: 'x', stream }
        : { input: 'x' };
  return JSON.stringify({ model, ...base, ...extra });
}

const CASES = (['chat', 'responses', 'embeddings'] as const).flatMap((endpoint) =>
  (endpoint === 'embeddings' ? [false] : [false, true]).map((stream) => [endpoint, stream] as const),
);

/** Switched on, every adapter call fails in the gateway's own code (a stand-in for a bug on the way to the upstream). */
const sabotage = { on: false };
const faultyWhenSabotaged: AdapterFactory = (config) => {
  const real = createAdapter(config);
  const embeddings = real.embeddings?.bind(real);
  const fail = async (): Promise<never> => {
    throw new RangeError('Maximum call stack size exceeded');
  };
  return {
    type: real.type,
    chat: (req, ctx) => (sabotage.on ? fail() : real.chat(req, ctx)),
    responses: (req, ctx) => (sabotage.on ? fail() : real.responses(req, ctx)),
    embeddings: (req, ctx) => (sabotage.on || !embeddings ? fail() : embeddings(req, ctx)),
    close: () => real.close(),
  };
};

describe.each(['memory', 'redis'] as const)(
  'a trial whose request says nothing about the provider is given back at once (%s health store)',
  (backend) => {
    let upstream: FakeUpstream;
    let redis: TestRedis | undefined;
    let conn: Redis | undefined;
    let health: HealthStore;
    let gateway: TestGateway;

    beforeAll(async () => {
      upstream = await startFakeUpstream();
      if (backend === 'redis') {
        redis = await startRedis();
        const c = new Redis(redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
        conn = c;
        await new Promise((resolve, reject) => c.once('ready', resolve).once('error', reject));
        health = new RedisHealthStore(c, uniquePrefix('trial-back'), SETTINGS, () => 60_000);
      } else health = new MemoryHealthStore(SETTINGS);
      gateway = await startTestGateway(YAML, { UP: upstream.url }, undefined, {
        health,
        adapterFactory: faultyWhenSabotaged,
      });
    });
    afterAll(async () => {
      await gateway.close();
      conn?.disconnect();
      await Promise.all([upstream.close(), redis?.stop()]);
    });
    afterEach(() => {
      sabotage.on = false;
    });

    const post = async (endpoint: Endpoint, body: string, signal?: AbortSignal) => {
      const res = await fetch(`${gateway.url}${PATHS[endpoint]}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        signal,
      });
      return { status: res.status, text: await res.text() };
    };

    /** Takes `model`'s provider out by one failed request, then waits out its 200 ms cooldown: half-open. */
    async function halfOpen(model: Model): Promise<void> {
      await health.recordRequest(PROVIDER[model], false, 'test: upstream answered 503');
      await waitUntil(async () => health.trialsDue().has(PROVIDER[model]), 2000, `${model} to be half-open`);
    }

    /** The trial is free now: the next request takes it, and a good upstream brings the provider back. */
    async function expectTrialTakenAndRecovered(endpoint: Endpoint, model: Model, stream: boolean): Promise<void> {
      expect(health.views().get(PROVIDER[model])?.state).toBe('half_open');
      const next = await post(endpoint, bodyOf(endpoint, model, stream));
      expect(next.status).toBe(200);
      await waitUntil(async () => !health.unhealthy().has(PROVIDER[model]), 2000, `${model} to be healthy`);
      expect(health.views().get(PROVIDER[model])?.state).toBe('healthy');
    }

    it.each([false, true])(
      "Responses on an Ollama adapter (stream %s): the translation's 400 gives the trial back",
      async (stream) => {
        await halfOpen('mo');
        const bad = await post('responses', bodyOf('responses', 'mo', stream, { text: { format: { type: 'bogus' } } }));
        expect(bad.status).toBe(400);
        expect((JSON.parse(bad.text) as { error: { param: string } }).error.param).toBe('text.format.type');
        await expectTrialTakenAndRecovered('responses', 'mo', stream);
        // /status says so too.
        const status = (await (await fetch(`${gateway.url}/status`)).json()) as {
          nodes: { resources: { id: string; state: string }[] }[];
        };
        expect(status.nodes[0].resources.find((r) => r.id === 'olla')?.state).toBe('ready');
      },
    );

    it.each([false, true])(
      'a field the adapter cannot carry (chat, stream %s) is refused before any trial is claimed',
      async (stream) => {
        await halfOpen('mo');
        const bad = await post('chat', bodyOf('chat', 'mo', stream, { n: 2 }));
        expect(bad.status).toBe(400);
        await expectTrialTakenAndRecovered('chat', 'mo', stream);
      },
    );

    it.each(CASES)(
      '%s (stream %s): the client leaving before the first byte gives the trial back',
      async (endpoint, stream) => {
        await halfOpen('mc');
        const client = new AbortController();
        const leaving = post(
          endpoint,
          bodyOf(endpoint, 'mc', stream, { fake: { delay_ms: 30_000 } }),
          client.signal,
        ).catch(() => 'aborted');
        await waitUntil(
          async () => (await gateway.queue.counts(['compat'])).get('compat')?.inFlight === 1,
          5000,
          'the trial to reach the upstream',
        );
        expect(health.views().get('compat')?.state).toBe('trial');
        client.abort();
        expect(await leaving).toBe('aborted');
        // Given back once the cut call is closed (at most the adapter's close_wait_ms, 2 s), not after 80 s.
        await waitUntil(async () => health.trialsDue().has('compat'), 5000, 'the trial to be given back');
        await expectTrialTakenAndRecovered(endpoint, 'mc', stream);
      },
    );

    it.each(CASES)(
      '%s (stream %s): a failure in the gateway itself (500) gives the trial back',
      async (endpoint, stream) => {
        await halfOpen('mc');
        sabotage.on = true;
        const failed = await post(endpoint, bodyOf(endpoint, 'mc', stream));
        expect(failed.status).toBe(500);
        expect((JSON.parse(failed.text) as { error: { code: string } }).error.code).toBe('internal_error');
        sabotage.on = false;
        await expectTrialTakenAndRecovered(endpoint, 'mc', stream);
      },
    );

    it.each(CASES)(
      '%s (stream %s): the control: a trial the upstream fails is booked, another cooldown',
      async (endpoint, stream) => {
        await halfOpen('mc');
        const failed = await post(endpoint, bodyOf(endpoint, 'mc', stream, { fake: { status: 500 } }));
        expect(failed.status).toBe(502);
        // A failure is booked in the background (the Redis store writes after the answer).
        await waitUntil(
          async () => health.views().get('compat')?.state === 'unhealthy',
          2000,
          'the failure to be booked',
        );
        expect(health.views().get('compat')).toMatchObject({
          state: 'unhealthy',
          reason: expect.stringContaining('trial request failed'),
        });
        // Out for the cooldown: the next request finds no provider.
        expect((await post(endpoint, bodyOf(endpoint, 'mc', stream))).status).toBe(503);
        await waitUntil(async () => health.trialsDue().has('compat'), 2000, 'the next cooldown to end');
        await expectTrialTakenAndRecovered(endpoint, 'mc', stream);
      },
    );
  },
);
