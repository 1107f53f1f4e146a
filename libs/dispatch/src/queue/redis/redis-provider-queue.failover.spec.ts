import { Redis } from 'ioredis';
import { startRedis, startTcpProxy, uniquePrefix, waitUntil, type TcpProxy, type TestRedis } from '../../testing';
import type { LeaseRequest, QueueProvider } from '../provider-queue';
import { RedisProviderQueue } from './redis-provider-queue';

let primary: TestRedis;
let replica: TestRedis;
let proxy: TcpProxy;
beforeAll(async () => {
  [primary, replica] = await Promise.all([startRedis({ forceOwn: true }), startRedis({ forceOwn: true })]);
  await admin(replica, (r) => r.replicaof('127.0.0.1', primary.port ?? 0));
  await waitUntil(
    async () => /master_link_status:up/.test(await admin(replica, (r) => r.info('replication'))),
    10_000,
    'the replica to sync',
  );
  proxy = await startTcpProxy(primary.port ?? 0);
});
afterAll(async () => {
  await proxy?.close();
  await Promise.all([primary?.stop(), replica?.stop()]);
});

/** One command on a server of its own connection. */
async function admin<T>(server: TestRedis, fn: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis(server.url);
  try {
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

const p: QueueProvider = { providerId: 'p', maxConcurrency: 2, maxQueued: 100 };
const request: LeaseRequest = { modelGroupKey: 'llama', candidates: [p], maxWaitMs: 8000 };

describe('RedisProviderQueue through a failover behind one endpoint', () => {
  it('reconnects on READONLY, treats the new primary like a restart, and serves again within 5 s without exceeding the limit', async () => {
    const lines: { level: string; msg: string }[] = [];
    const log = (level: string) => (_o: object, msg: string) => void lines.push({ level, msg });
    const logger = { info: log('info'), warn: log('warn'), error: log('error') };
    const prefix = uniquePrefix('failover');
    const queues = [0, 1].map(() => new RedisProviderQueue({ redisUrl: proxy.url, prefix, logger }));
    try {
      await Promise.all(queues.map((q) => q.configure([p])));
      let inUse = 0;
      let peak = 0;
      let running = true;
      const granted: number[] = [];
      const failures: string[] = [];
      const worker = async (q: RedisProviderQueue) => {
        while (running) {
          try {
            const lease = await q.acquireLease(request);
            granted.push(Date.now());
            peak = Math.max(peak, ++inUse);
            await new Promise((r) => setTimeout(r, 20));
            inUse--;
            await lease.release();
          } catch (e) {
            failures.push((e as { code?: string }).code ?? String(e));
            await new Promise((r) => setTimeout(r, 20));
          }
        }
      };
      const workers = [0, 1, 2, 3, 4, 5].map((i) => worker(queues[i % 2]));
      await waitUntil(() => granted.length >= 20, 10_000, 'admissions before the failover');

      // The replica becomes the primary, the old primary its replica, and the endpoint follows.
      await admin(replica, (r) => r.replicaof('NO', 'ONE'));
      await admin(primary, (r) => r.replicaof('127.0.0.1', replica.port ?? 0));
      proxy.setTarget(replica.port ?? 0);
      const failedOverAt = Date.now();
      await waitUntil(() => granted.some((t) => t > failedOverAt + 100), 5000, 'an admission on the new primary');
      process.stdout.write(
        `failover: first admission after ${Math.min(...granted.filter((t) => t > failedOverAt + 100)) - failedOverAt} ms\n`,
      );
      await waitUntil(() => granted.filter((t) => t > failedOverAt).length >= 20, 10_000, 'admissions go on');
      running = false;
      await Promise.all(workers);

      expect(peak).toBeLessThanOrEqual(2);
      expect(failures.every((code) => code === 'queue_unavailable')).toBe(true);
      await waitUntil(
        async () => (await queues[0].counts(['p'])).get('p')?.inFlight === 0,
        5000,
        'no lease left on the new primary',
      );
      const said = (re: RegExp) => lines.filter((l) => re.test(l.msg));
      expect(said(/READONLY: a failover demoted this node/).length).toBeGreaterThanOrEqual(1);
      expect(said(/READONLY: a failover demoted this node/).length).toBeLessThanOrEqual(2);
      expect(said(/Redis restarted \(or failed over/).length).toBeGreaterThanOrEqual(1);
      expect(said(/Redis reachable again/).length).toBe(said(/Redis unreachable/).length);
    } finally {
      await Promise.all(queues.map((q) => q.close()));
    }
  }, 40_000);
});
