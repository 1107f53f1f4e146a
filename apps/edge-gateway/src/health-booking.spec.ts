import { LeaseKeys, MemoryHealthStore, RedisHealthStore } from '@iop/dispatch';
import { scanKeys, startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream } from '@iop/fake-upstream';
import { Redis } from 'ioredis';
import type { AdapterFactory } from './adapters/adapter';
import { createAdapter } from './adapters/adapter-registry';
import { bodyWith, expectTooDeep, nested, PATH, post, states, twoProviders } from './testing/client-input';
import { startTestGateway } from './testing/gateway-harness';

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
