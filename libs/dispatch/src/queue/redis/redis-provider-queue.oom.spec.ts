import { Redis } from 'ioredis';
import { startRedis, uniquePrefix, type TestRedis } from '../../testing';
import { AdmissionError } from '../admission-error';
import { waitUntil } from '../provider-queue.contract';
import type { LeaseRequest, QueueProvider } from '../provider-queue';
import { DEFAULT_SHARD_TAG } from '../lease-keys';
import { RedisProviderQueue } from './redis-provider-queue';

// Redis over maxmemory under noeviction refuses every write that may add memory with an OOM reply
// (docs/architecture.md, "Redis over maxmemory"): the replica must read that as an answer, not as a
// hung Redis, so waiting requests keep their place and held leases their slots.

let redis: TestRedis;
let admin: Redis;
beforeAll(async () => {
  redis = await startRedis({ forceOwn: true });
  admin = new Redis(redis.url);
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
});
afterAll(async () => {
  admin?.disconnect();
  await redis?.stop();
});
afterEach(async () => {
  await admin.config('SET', 'maxmemory', '0');
});

interface Logged {
  level: 'info' | 'warn' | 'error';
  msg: string;
}

function makeQueue(prefix: string, logged: Logged[]): RedisProviderQueue {
  const log = (level: Logged['level']) => (_o: object, msg: string) => logged.push({ level, msg });
  return new RedisProviderQueue({
    redisUrl: redis.url,
    prefix,
    logger: { info: log('info'), warn: log('warn'), error: log('error') },
  });
}

const provider: QueueProvider = { providerId: 'p', maxConcurrency: 1, maxQueued: 10 };
const request = (extra: Partial<LeaseRequest> = {}): LeaseRequest => ({
  modelGroupKey: 'llama',
  candidates: [provider],
  maxWaitMs: 20_000,
  ...extra,
});
const overMaxmemory = () => admin.config('SET', 'maxmemory', '1');
const belowMaxmemory = () => admin.config('SET', 'maxmemory', '0');
/** Longer than the silence limit of the default options (`leaseTtlMs - fenceMarginMs`, 1.8 s). */
const PAST_SILENCE_LIMIT_MS = 3000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('RedisProviderQueue while Redis is over maxmemory (OOM replies)', () => {
  it('keeps waiting requests in line past the silence limit and grants them as held leases are released', async () => {
    const logged: Logged[] = [];
    const q = makeQueue(uniquePrefix('oom-wait'), logged);
    try {
      await q.configure([provider]);
      const held = await q.acquireLease(request());
      let waiterError: unknown;
      const waiting = q.acquireLease(request()).catch((e: unknown) => {
        waiterError = e;
        return undefined;
      });
      await waitUntil(async () => (await q.counts(['p'])).get('p')?.queued === 1, 5000, 'a waiting request');
      await overMaxmemory();
      await sleep(PAST_SILENCE_LIMIT_MS);

      expect(waiterError).toBeUndefined();
      // The held lease kept renewing (its script's library first loaded over maxmemory): not fenced.
      expect(held.signal.aborted).toBe(false);
      expect(q.redisReachable()).toBe(true);
      // A new admission is refused, and says why in its detail (the log), not "has not answered".
      const refused = await q.acquireLease(request()).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(AdmissionError);
      expect((refused as AdmissionError).code).toBe('queue_unavailable');
      expect((refused as AdmissionError).detail).toMatch(/OOM command not allowed/);
      expect((refused as AdmissionError).message).toBe(
        "The gateway's provider queue (Redis) is out of memory and takes no new requests right now; retry shortly.",
      );

      await held.release();
      const granted = await waiting;
      expect(waiterError).toBeUndefined();
      if (granted === undefined) throw new Error('the waiting request was not granted');
      expect((await q.counts(['p'])).get('p')).toMatchObject({ inFlight: 1, queued: 0 });
      await granted.release();
      expect((await q.counts(['p'])).get('p')).toMatchObject({ inFlight: 0, queued: 0 });

      const warnings = logged.filter((l) => l.level === 'warn').map((l) => l.msg);
      expect(warnings.filter((m) => /over maxmemory/.test(m))).toHaveLength(1);
      expect(warnings.filter((m) => /no answer|unreachable/.test(m))).toEqual([]);

      await belowMaxmemory();
      await waitUntil(
        async () => logged.some((l) => l.level === 'info' && /accepts writes again/.test(l.msg)),
        5000,
        'the end of the OOM condition logged',
      );
      const after = await q.acquireLease(request());
      await after.release();
    } finally {
      await q.close();
    }
  });

  it('writes limits a reload set while Redis refused them once it accepts writes again, without a reconnect', async () => {
    const logged: Logged[] = [];
    const q = makeQueue(uniquePrefix('oom-limits'), logged);
    try {
      await q.configure([provider]);
      await overMaxmemory();
      const wider = { ...provider, maxConcurrency: 2 };
      await q.configure([wider]);
      expect(logged.some((l) => l.level === 'warn' && /limits not written/.test(l.msg))).toBe(true);
      await belowMaxmemory();
      await waitUntil(
        async () => (await admin.hget(q.keys.queueKey(DEFAULT_SHARD_TAG, 'p', 'limits'), 'max_concurrency')) === '2',
        3000,
        'the new limit written',
      );
      const leases = [
        await q.acquireLease(request({ candidates: [wider] })),
        await q.acquireLease(request({ candidates: [wider] })),
      ];
      await Promise.all(leases.map((l) => l.release()));
    } finally {
      await q.close();
    }
  });

  it('lets a waiter of another replica time out at max_wait_ms and leave no job behind', async () => {
    const prefix = uniquePrefix('oom-timeout');
    const logged: Logged[] = [];
    const [holder, other] = [makeQueue(prefix, logged), makeQueue(prefix, logged)];
    try {
      await Promise.all([holder.configure([provider]), other.configure([provider])]);
      const held = await holder.acquireLease(request());
      const waiting = other.acquireLease(request({ maxWaitMs: PAST_SILENCE_LIMIT_MS })).catch((e: unknown) => e);
      await waitUntil(async () => (await other.counts(['p'])).get('p')?.queued === 1, 5000, 'a waiting request');
      await overMaxmemory();

      const error = await waiting;
      expect(error).toBeInstanceOf(AdmissionError);
      expect((error as AdmissionError).code).toBe('queue_timeout');
      expect((await other.counts(['p'])).get('p')).toMatchObject({ inFlight: 1, queued: 0 });
      await held.release();
      expect((await other.counts(['p'])).get('p')).toMatchObject({ inFlight: 0, queued: 0 });
    } finally {
      await belowMaxmemory();
      await Promise.all([holder.close(), other.close()]);
    }
  });
});

describe('RedisProviderQueue while Redis refuses every write (NOREPLICAS)', () => {
  it('fails waiting requests once the refusals last the silence limit, and logs the refusal, not silence', async () => {
    const logged: Logged[] = [];
    const prefix = uniquePrefix('noreplicas');
    const q = makeQueue(prefix, logged);
    // A replica that holds no lease: only its liveness refresh (a MULTI, answered EXECABORT) is refused.
    const idleLogged: Logged[] = [];
    const idle = makeQueue(prefix, idleLogged);
    try {
      await Promise.all([q.configure([provider]), idle.configure([provider])]);
      const held = await q.acquireLease(request());
      const waiting = q.acquireLease(request()).catch((e: unknown) => e);
      await waitUntil(async () => (await q.counts(['p'])).get('p')?.queued === 1, 5000, 'a waiting request');
      // No replica is attached: with min-replicas-to-write 1 Redis refuses every write, scripts included.
      await admin.config('SET', 'min-replicas-to-write', '1');
      const error = await waiting;
      expect(error).toBeInstanceOf(AdmissionError);
      expect((error as AdmissionError).code).toBe('queue_unavailable');
      expect((error as AdmissionError).message).toMatch(/Redis has refused writes for \d+ ms while the request waited/);
      const outage = logged.find((l) => l.level === 'warn' && /Redis unreachable/.test(l.msg));
      expect(outage?.msg).toMatch(/writes refused for \d+ ms: NOREPLICAS/);
      await waitUntil(
        async () => idleLogged.some((l) => l.level === 'warn' && /Redis unreachable/.test(l.msg)),
        3000,
        'the idle replica to see the outage',
      );
      expect(idleLogged.find((l) => /Redis unreachable/.test(l.msg))?.msg).toMatch(
        /writes refused for \d+ ms: NOREPLICAS/,
      );
      const refused = await q.acquireLease(request()).catch((e: unknown) => e);
      expect((refused as AdmissionError).detail).toMatch(/Redis has refused writes for \d+ ms: NOREPLICAS/);
      await admin.config('SET', 'min-replicas-to-write', '0');
      await waitUntil(
        async () => logged.some((l) => l.level === 'info' && /Redis reachable again/.test(l.msg)),
        5000,
        'the end of the outage logged',
      );
      await held.release().catch(() => undefined);
      await waitUntil(
        async () => (await q.counts(['p'])).get('p')?.inFlight === 0 && (await q.counts(['p'])).get('p')?.queued === 0,
        5000,
        'nothing left in flight or queued',
      );
    } finally {
      await admin.config('SET', 'min-replicas-to-write', '0');
      await Promise.all([q.close(), idle.close()]);
    }
  });
});
