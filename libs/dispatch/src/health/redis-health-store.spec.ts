import { Redis } from 'ioredis';
import { startRedis, uniquePrefix, type TestRedis } from '../testing';
import { collectTransitions, CONTRACT_SETTINGS, describeHealthStoreContract } from './health-store.contract';
import { LeaseKeys } from '../queue/lease-keys';
import { RedisHealthStore } from './redis-health-store';

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});

const settings = () => ({ unhealthy_after: 3, healthy_after: 2 });

/** A fail-fast connection (as the gateway uses), once it is ready. */
async function connect(): Promise<Redis> {
  const conn = new Redis(redis.url, { enableOfflineQueue: false });
  await new Promise((resolve, reject) => conn.once('ready', resolve).once('error', reject));
  return conn;
}

describeHealthStoreContract('redis', async () => {
  const prefix = uniquePrefix('health');
  const [a, b] = await Promise.all([connect(), connect()]);
  const transitions: [string[], string[]] = [[], []];
  const store = (conn: Redis, seen: string[]) =>
    new RedisHealthStore(
      conn,
      prefix,
      () => CONTRACT_SETTINGS,
      () => 10_000,
      undefined,
      collectTransitions(seen),
    );
  return {
    stores: [store(a, transitions[0]), store(b, transitions[1])],
    transitions,
    cleanup: async () => {
      a.disconnect();
      b.disconnect();
    },
  };
});

describe('RedisHealthStore across replicas', () => {
  it('counts failures seen by different replicas together, so replicas agree', async () => {
    const prefix = uniquePrefix('health-shared');
    const [ca, cb] = await Promise.all([connect(), connect()]);
    const a = new RedisHealthStore(ca, prefix, settings, () => 10_000);
    const b = new RedisHealthStore(cb, prefix, settings, () => 10_000);
    try {
      await a.record('p', false);
      await b.record('p', false);
      await a.record('p', false);
      await b.refresh(['p']);
      expect(b.unhealthy().has('p')).toBe(true);
    } finally {
      ca.disconnect();
      cb.disconnect();
    }
  });

  it('loses no update when replicas write at once (compare-and-set)', async () => {
    const prefix = uniquePrefix('health-cas');
    const [ca, cb] = await Promise.all([connect(), connect()]);
    const lenient = () => ({ unhealthy_after: 1000, healthy_after: 2 });
    const a = new RedisHealthStore(ca, prefix, lenient, () => 10_000);
    const b = new RedisHealthStore(cb, prefix, lenient, () => 10_000);
    try {
      await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).recordRequest('p', false)));
      const record = JSON.parse((await ca.hget(new LeaseKeys(prefix).healthKey('p'), 'rec')) ?? '{}') as {
        requestFailures: number;
      };
      expect(record.requestFailures).toBe(20);
    } finally {
      ca.disconnect();
      cb.disconnect();
    }
  });

  it("agrees on when a back-off and a cooldown end although the replicas' clocks differ by 3 minutes (Redis's clock)", async () => {
    const prefix = uniquePrefix('health-clock');
    const [ca, cb] = await Promise.all([connect(), connect()]);
    const skewed = (ms: number) => () => Date.now() + ms;
    const thresholds = () => ({ unhealthy_after: 1, healthy_after: 1, cooldown_ms: 4000 });
    const ahead = new RedisHealthStore(ca, prefix, thresholds, () => 60_000, undefined, undefined, skewed(90_000));
    const behind = new RedisHealthStore(cb, prefix, thresholds, () => 60_000, undefined, undefined, skewed(-90_000));
    try {
      await ahead.backOff('p', 3, 'upstream 429');
      await behind.recordRequest('q', false, 'upstream_error');
      await Promise.all([ahead.refresh(['p', 'q']), behind.refresh(['p', 'q'])]);
      for (const store of [ahead, behind]) {
        const [p, q] = [store.views().get('p'), store.views().get('q')];
        expect([p?.state, q?.state]).toEqual(['backoff', 'unhealthy']);
        // Both ends measured from each store's own now: 3 s and 4 s away, whichever replica wrote them.
        expect(Math.abs((p?.retryAt ?? 0) - store.now() - 3000)).toBeLessThan(500);
        expect(Math.abs((q?.retryAt ?? 0) - store.now() - 4000)).toBeLessThan(500);
      }
      expect(Math.abs(ahead.now() - behind.now())).toBeLessThan(100);
    } finally {
      ca.disconnect();
      cb.disconnect();
    }
  });

  it("forgets a provider's health when no replica refreshes it within the TTL", async () => {
    const prefix = uniquePrefix('health-ttl');
    const conn = await connect();
    const store = new RedisHealthStore(conn, prefix, settings, () => 150);
    try {
      for (let i = 0; i < 3; i++) await store.record('p', false);
      expect(store.unhealthy().has('p')).toBe(true);
      const deadline = Date.now() + 3000;
      while (store.unhealthy().has('p') && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        await store.refresh(['p']);
      }
      expect(store.unhealthy().has('p')).toBe(false);
    } finally {
      conn.disconnect();
    }
  });
});
