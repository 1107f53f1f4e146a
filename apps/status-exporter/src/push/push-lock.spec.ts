import { startRedis, uniquePrefix, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import type { StatusSnapshot } from '@iop/status';
import { Redis } from 'ioredis';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PushLock } from './push-lock';
import { StatusPusher } from './status-pusher';

/** A control plane that records which exporter sent each POST (`x-iop-status-pusher`) and when. */
class Receiver {
  readonly posts: { at: number; from: string }[] = [];
  url = '';
  private server!: Server;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        this.posts.push({ at: Date.now(), from: String(req.headers['x-iop-status-pusher']) });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/status`;
  }

  from(owner: string, since = 0): number {
    return this.posts.filter((p) => p.from === owner && p.at >= since).length;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const TTL_MS = 1500;
const INTERVAL_MS = 100;
const snapshot = (): Promise<StatusSnapshot> => Promise.resolve({ generated_at: new Date().toISOString(), nodes: [] });

/** One exporter's push side, as `startExporter` wires it: its own Redis connection, the lock, the pusher. */
function exporterPush(redisUrl: string, key: string, url: string) {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  const lock: PushLock = new PushLock({ redis, key, ttlMs: TTL_MS, onChange: (held) => held && pusher.pushNow() });
  const pusher: StatusPusher = new StatusPusher({
    url,
    intervalMs: INTERVAL_MS,
    lock,
    headers: { 'x-iop-status-pusher': lock.owner },
    snapshot,
  });
  return {
    redis,
    lock,
    pusher,
    start() {
      pusher.start();
      lock.start();
    },
    async close() {
      await pusher.close();
      await lock.close();
      redis.disconnect();
    },
  };
}

/**
 * README "Status", push: every pod's exporter reads the same counts, so one of them pushes. Two
 * exporters on one real Redis: exactly one pushes; when it dies (its Redis connection cut, its
 * renewals gone) the other takes over within the lock's TTL, and the dead one never pushes again.
 */
describe('PushLock: one exporter of the fleet pushes', () => {
  let redis: TestRedis;
  let receiver: Receiver;
  const open: { close(): Promise<void> }[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  beforeEach(async () => {
    receiver = new Receiver();
    await receiver.start();
  });
  afterEach(async () => {
    for (const o of open.splice(0)) await o.close();
    await receiver.close();
  });
  afterAll(async () => {
    await redis.stop();
  });

  it('two exporters: exactly one pushes; the other takes over within the TTL once the first dies', async () => {
    const key = `${uniquePrefix('push-lock')}:status-push-lock`;
    const a = exporterPush(redis.url, key, receiver.url);
    const b = exporterPush(redis.url, key, receiver.url);
    open.push(a, b);
    a.start();
    b.start();
    await waitUntil(() => receiver.posts.length >= 10, 5000, 'ten pushes');
    const [first, second] = a.lock.held ? [a, b] : [b, a];
    expect([a.lock.held, b.lock.held].sort()).toEqual([false, true]);
    expect(receiver.from(second.lock.owner)).toBe(0);
    // Exactly one pusher's worth: about one POST per interval.
    const steady = Date.now();
    await new Promise((r) => setTimeout(r, 1000));
    expect(receiver.from(second.lock.owner)).toBe(0);
    expect(receiver.from(first.lock.owner, steady)).toBeLessThanOrEqual(1000 / INTERVAL_MS + 1);

    // The holder dies: its connection is cut for good and it renews nothing more.
    first.redis.disconnect();
    const died = Date.now();
    await waitUntil(() => receiver.from(second.lock.owner) > 0, TTL_MS + 2000, 'the second exporter to take over');
    const takeover = (receiver.posts.find((p) => p.from === second.lock.owner)?.at ?? Infinity) - died;
    expect(takeover).toBeLessThanOrEqual(TTL_MS + 300);
    expect(first.lock.held).toBe(false);
    const after = Date.now();
    await new Promise((r) => setTimeout(r, 500));
    expect(receiver.from(first.lock.owner, after)).toBe(0);
    expect(receiver.from(second.lock.owner, after)).toBeGreaterThan(0);
  });

  it('close() releases the lock (the key is gone at once), and the other exporter takes it', async () => {
    const key = `${uniquePrefix('push-lock')}:status-push-lock`;
    const a = exporterPush(redis.url, key, receiver.url);
    open.push(a);
    a.start();
    await waitUntil(() => a.lock.held, 2000, 'the first exporter to hold the lock');
    const b = exporterPush(redis.url, key, receiver.url);
    open.push(b);
    b.start();
    await waitUntil(() => receiver.from(a.lock.owner) > 0, 2000, 'a push by the holder');
    const check = new Redis(redis.url);
    expect(await check.get(key)).toBe(a.lock.owner);
    await a.close();
    expect(await check.get(key)).not.toBe(a.lock.owner);
    await waitUntil(() => receiver.from(b.lock.owner) > 0, TTL_MS + 500, 'the second exporter to push');
    expect(await check.get(key)).toBe(b.lock.owner);
    check.disconnect();
  });

  it('a lock taken by another owner is never renewed nor released by a former holder', async () => {
    const key = `${uniquePrefix('push-lock')}:status-push-lock`;
    const a = exporterPush(redis.url, key, receiver.url);
    open.push(a);
    a.start();
    await waitUntil(() => a.lock.held, 2000, 'the lock held');
    const other = new Redis(redis.url);
    // Another exporter's lock (as after an expiry during a long pause of this one).
    await other.set(key, 'someone-else', 'PX', 60_000);
    await waitUntil(() => !a.lock.held, TTL_MS, 'the former holder to notice');
    await a.close();
    expect(await other.get(key)).toBe('someone-else');
    other.disconnect();
  });
});
