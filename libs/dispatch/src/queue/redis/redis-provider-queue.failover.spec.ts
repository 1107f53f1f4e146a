import { Redis } from 'ioredis';
import {
  startLeaseLoad,
  startRedis,
  startRedisSentinel,
  startTcpProxy,
  uniquePrefix,
  waitUntil,
  type TestRedis,
} from '../../testing';
import type { LeaseRequest, QueueProvider } from '../provider-queue';
import { RedisProviderQueue } from './redis-provider-queue';

/** One command on a server over its own connection. */
async function admin<T>(server: TestRedis, fn: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis(server.url);
  try {
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

/** Two redis-servers, the second a synced replica of the first. */
async function primaryAndReplica(): Promise<[TestRedis, TestRedis]> {
  const [primary, replica] = await Promise.all([startRedis({ forceOwn: true }), startRedis({ forceOwn: true })]);
  await admin(replica, (r) => r.replicaof('127.0.0.1', primary.port ?? 0));
  await waitUntil(
    async () => /master_link_status:up/.test(await admin(replica, (r) => r.info('replication'))),
    10_000,
    'the replica to sync',
  );
  return [primary, replica];
}

const p: QueueProvider = { providerId: 'p', maxConcurrency: 2, maxQueued: 100 };
const request: LeaseRequest = { modelGroupKey: 'llama', candidates: [p], maxWaitMs: 8000 };

/** Two replicas of the gateway on `url`, logging into `lines`. */
function gateways(url: string, lines: { level: string; msg: string }[]): RedisProviderQueue[] {
  const log = (level: string) => (_o: object, msg: string) => void lines.push({ level, msg });
  const logger = { info: log('info'), warn: log('warn'), error: log('error') };
  const prefix = uniquePrefix('failover');
  return [0, 1].map(() => new RedisProviderQueue({ redisUrl: url, prefix, logger }));
}

describe('RedisProviderQueue through a failover', () => {
  const stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) await stop();
  });

  it('behind one endpoint: reconnects on READONLY, treats the new primary like a restart, serves again within 5 s, never above the limit', async () => {
    const [primary, replica] = await primaryAndReplica();
    const proxy = await startTcpProxy(primary.port ?? 0);
    const lines: { level: string; msg: string }[] = [];
    const queues = gateways(proxy.url, lines);
    stops.push(
      primary.stop,
      replica.stop,
      proxy.close,
      async () => void (await Promise.all(queues.map((q) => q.close()))),
    );
    await Promise.all(queues.map((q) => q.configure([p])));
    const load = startLeaseLoad(queues, request);
    await waitUntil(() => load.grantedAt.length >= 20, 10_000, 'admissions before the failover');

    // The replica becomes the primary, the old primary its replica, and the endpoint follows.
    await admin(replica, (r) => r.replicaof('NO', 'ONE'));
    await admin(primary, (r) => r.replicaof('127.0.0.1', replica.port ?? 0));
    proxy.setTarget(replica.port ?? 0);
    const failedOverAt = Date.now();
    await waitUntil(() => load.grantedAt.some((t) => t > failedOverAt + 100), 5000, 'an admission on the new primary');
    const backMs = Math.min(...load.grantedAt.filter((t) => t > failedOverAt + 100)) - failedOverAt;
    process.stdout.write(`failover behind one endpoint: first admission ${backMs} ms after the switch\n`);
    await waitUntil(() => load.grantedAt.filter((t) => t > failedOverAt).length >= 20, 10_000, 'admissions go on');
    const { peak, failures } = await load.stop();

    expect(peak).toBeLessThanOrEqual(2);
    expect(failures.every((code) => code === 'queue_unavailable')).toBe(true);
    await waitUntil(async () => (await queues[0].counts(['p'])).get('p')?.inFlight === 0, 5000, 'no lease left');
    const said = (re: RegExp) => lines.filter((l) => re.test(l.msg)).length;
    expect(said(/READONLY: a failover demoted this node/)).toBeGreaterThanOrEqual(1);
    expect(said(/READONLY: a failover demoted this node/)).toBeLessThanOrEqual(2);
    expect(said(/Redis restarted \(or failed over/)).toBeGreaterThanOrEqual(1);
    expect(said(/Redis reachable again/)).toBe(said(/Redis unreachable/));
  }, 40_000);

  it('with Sentinel (redis+sentinel://): follows the promoted replica, serves again, never above the limit', async () => {
    const [primary, replica] = await primaryAndReplica();
    const sentinel = await startRedisSentinel(primary.port ?? 0);
    const lines: { level: string; msg: string }[] = [];
    const queues = gateways(sentinel.url, lines);
    stops.push(primary.stop, replica.stop, sentinel.stop, async () => {
      await Promise.all(queues.map((q) => q.close()));
    });
    await Promise.all(queues.map((q) => q.configure([p])));
    const load = startLeaseLoad(queues, request);
    await waitUntil(() => load.grantedAt.length >= 20, 10_000, 'admissions before the failover');

    await sentinel.failover();
    await waitUntil(async () => (await sentinel.masterPort()) === replica.port, 10_000, 'the Sentinel to promote');
    const failedOverAt = Date.now();
    await waitUntil(() => load.grantedAt.some((t) => t > failedOverAt + 100), 8000, 'an admission on the new primary');
    const backMs = Math.min(...load.grantedAt.filter((t) => t > failedOverAt + 100)) - failedOverAt;
    process.stdout.write(`Sentinel failover: first admission ${backMs} ms after the Sentinel named the new primary\n`);
    await waitUntil(() => load.grantedAt.filter((t) => t > failedOverAt).length >= 20, 10_000, 'admissions go on');
    const { peak, failures } = await load.stop();

    expect(peak).toBeLessThanOrEqual(2);
    expect(failures.every((code) => code === 'queue_unavailable')).toBe(true);
    await waitUntil(async () => (await queues[0].counts(['p'])).get('p')?.inFlight === 0, 5000, 'no lease left');
    expect(lines.filter((l) => /Redis restarted \(or failed over/.test(l.msg)).length).toBeGreaterThanOrEqual(1);
  }, 60_000);
});
