import {
  MemoryHealthStore,
  MemoryProviderQueue,
  RedisHealthStore,
  RedisProviderQueue,
  type HealthStore,
  type HealthTransition,
  type ProviderQueue,
} from '@iop/dispatch';
import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { Redis } from 'ioredis';
import pino from 'pino';
import { startTestGateway, type TestGateway } from './testing/gateway-harness';

/**
 * README "Provider health": a provider busy with long completions answers its probe late (the probe
 * waits behind the work, `probesWaitForWork`) and times out; while it has requests in flight, or
 * served one within `interval_ms` (on any replica), such a timeout is no evidence: it stays a
 * candidate and keeps its share of the queue. A refused probe still counts, and a hung provider is
 * still taken out by its requests. On the memory backend (one gateway) and on Redis (two in-process
 * replicas sharing queue and health, every request through the first one, both probing).
 */

const HEALTH = { interval_ms: 200, timeout_ms: 150, unhealthy_after: 2, healthy_after: 1, cooldown_ms: 60_000 };

/**
 * Pool `pm`: `busy` (3 slots, on `${BUSY}`, of adapter type `type`) and `sibling` (1 slot); `solo`
 * (model `sm`) on `${BUSY}` too.
 */
const yaml = (type: 'vllm' | 'ollama' | 'openai_compat', requestTimeoutMs: number) => `
version: 1
gateway: { request_timeout_ms: ${requestTimeoutMs}, stream_idle_timeout_ms: 5000 }
queue: { max_wait_ms: 30000 }
health: ${JSON.stringify(HEALTH)}
nodes:
  - id: n
    adapters:
      - { id: b, type: ${type}, base_url: "\${BUSY}" }
      - { id: s, type: openai_compat, base_url: "\${SIBLING}" }
    providers:
      - { id: busy, category: ${type}, adapter: b, models: [pm], max_concurrency: 3 }
      - { id: sibling, category: openai_compat, adapter: s, models: [pm], max_concurrency: 1 }
      - { id: solo, category: ${type}, adapter: b, models: [sm], max_concurrency: 2 }
`;

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});

/** The replicas of one test, their health stores, and every transition any of them reported. */
interface Fleet {
  replicas: TestGateway[];
  stores: HealthStore[];
  transitions: string[];
  close(): Promise<void>;
}

async function startFleet(
  backend: 'memory' | 'redis',
  type: 'vllm' | 'ollama' | 'openai_compat',
  env: Record<string, string>,
  requestTimeoutMs = 5000,
): Promise<Fleet> {
  const transitions: string[] = [];
  const onTransition = (id: string, t: HealthTransition) =>
    transitions.push(`${id}: ${t.from} → ${t.to} (${t.reason})`);
  const prefix = uniquePrefix('busy-health');
  const connections: Redis[] = [];
  const replicas: TestGateway[] = [];
  for (let i = 0; i < (backend === 'redis' ? 2 : 1); i++) {
    let queue: ProviderQueue = new MemoryProviderQueue();
    let health: HealthStore = new MemoryHealthStore(() => HEALTH, onTransition);
    if (backend === 'redis') {
      queue = new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: pino({ level: 'silent' }) });
      const conn = new Redis(redis.url, { enableOfflineQueue: false });
      await new Promise((resolve, reject) => conn.once('ready', resolve).once('error', reject));
      connections.push(conn);
      health = new RedisHealthStore(
        conn,
        prefix,
        () => HEALTH,
        () => 3 * HEALTH.interval_ms,
        undefined,
        onTransition,
      );
    }
    replicas.push(await startTestGateway(yaml(type, requestTimeoutMs), env, queue, { health, probe: true }));
  }
  return {
    replicas,
    stores: replicas.map((r) => r.health as HealthStore),
    transitions,
    close: async () => {
      await Promise.all(replicas.map((r) => r.close()));
      for (const conn of connections) conn.disconnect();
    },
  };
}

/** A long request of `endpoint` to `model`: ~1.2 s before its answer, or a stream of 6 chunks 250 ms apart. */
function longRequest(endpoint: 'chat' | 'responses', model: string, stream: boolean): Record<string, unknown> {
  const fake = stream ? { chunks: 6, chunk_gap_ms: 250 } : { delay_ms: 1200 };
  const head = endpoint === 'chat' ? { messages: [{ role: 'user', content: 'hello' }] } : { input: 'hello' };
  return { model, ...head, stream, fake };
}

async function send(gateway: TestGateway, endpoint: 'chat' | 'responses', body: Record<string, unknown>) {
  const res = await fetch(`${gateway.url}/v1/${endpoint === 'chat' ? 'chat/completions' : 'responses'}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, resource: res.headers.get('x-iop-resource'), text };
}

describe.each([
  ['memory, one gateway', 'memory'],
  ['redis, two replicas', 'redis'],
] as const)('a provider busy with long completions (%s)', (_name, backend) => {
  let busy: FakeUpstream;
  let sibling: FakeUpstream;
  let fleet: Fleet | undefined;

  beforeEach(async () => {
    busy = await startFakeUpstream({ name: 'busy', probesWaitForWork: true });
    sibling = await startFakeUpstream({ name: 'sibling' });
  });
  afterEach(async () => {
    await fleet?.close();
    fleet = undefined;
    await busy.close();
    await sibling.close();
  });
  const env = () => ({ BUSY: busy.origin, SIBLING: sibling.url });

  it.each([
    ['vLLM, chat, not streamed', 'vllm', 'chat', false],
    ['Ollama, chat, streamed', 'ollama', 'chat', true],
    ['OpenAI-compatible, Responses passed through, not streamed', 'openai_compat', 'responses', false],
    ['Ollama, Responses translated, streamed', 'ollama', 'responses', true],
  ] as const)(
    '%s: its late probes do not take it out; it keeps serving its share while the queue drains',
    async (_what, type, endpoint, stream) => {
      fleet = await startFleet(backend, type, env());
      const { replicas, stores, transitions } = fleet;
      // Its probes answer at once while it is idle: one round passes before the load starts.
      await waitUntil(() => stores.every((s) => s.views().has('busy')), 3000, 'a first probe round on every replica');
      const results = await Promise.all(
        Array.from({ length: 8 }, () => send(replicas[0], endpoint, longRequest(endpoint, 'pm', stream))),
      );
      for (const r of results) expect(r.status).toBe(200);
      if (stream) for (const r of results) expect(r.text).not.toMatch(/event: error|"error":\{/);
      // Every probe round during the load timed out behind the work, and none counted.
      expect(transitions.filter((t) => t.startsWith('busy:'))).toEqual([]);
      for (const store of stores) {
        await store.refresh(['busy', 'sibling', 'solo']);
        expect(store.views().get('busy')?.state).toBe('healthy');
      }
      const served = (id: string) => results.filter((r) => r.resource === id).length;
      // 3 slots against 1: the busy provider served most, the queue did not pile onto its sibling.
      expect(served('busy')).toBeGreaterThan(served('sibling'));
    },
  );

  it('a refused probe still counts at once, though the provider served a request a moment ago', async () => {
    fleet = await startFleet(backend, 'vllm', env());
    const { replicas, stores } = fleet;
    const ok = await send(replicas[0], 'chat', { ...longRequest('chat', 'sm', false), fake: {} });
    expect(ok).toMatchObject({ status: 200, resource: 'solo' });
    await busy.close();
    const downAt = Date.now();
    for (const store of stores) {
      await waitUntil(
        async () => {
          await store.refresh(['busy', 'sibling', 'solo']);
          return store.unhealthy().has('solo');
        },
        5000,
        'solo to be taken out by its refused probes',
      );
      expect(store.views().get('solo')?.reason).toMatch(/probes failed: GET \S+ failed \(/);
    }
    // unhealthy_after: 2 rounds of 200 ms; the recent success did not hold it back.
    expect(Date.now() - downAt).toBeLessThan(2500);
  });

  it('a provider whose completions hang is still taken out by its requests, its late probes notwithstanding', async () => {
    fleet = await startFleet(backend, 'vllm', env(), 800);
    const { replicas, stores } = fleet;
    const hung = { ...longRequest('chat', 'sm', false), fake: { delay_ms: 600_000 } };
    const results = await Promise.all([send(replicas[0], 'chat', hung), send(replicas[0], 'chat', hung)]);
    // No first byte to anyone within request_timeout_ms: each timeout is booked (README "Provider health").
    for (const r of results) expect(r.status).toBe(504);
    for (const store of stores) {
      await waitUntil(
        async () => {
          await store.refresh(['busy', 'sibling', 'solo']);
          return store.unhealthy().has('solo');
        },
        3000,
        'solo to be taken out by its timed-out requests',
      );
      expect(store.views().get('solo')?.reason).toMatch(
        /requests failed: upstream sent no byte within \d+ ms \(gateway.request_timeout_ms\)/,
      );
    }
  });
});
