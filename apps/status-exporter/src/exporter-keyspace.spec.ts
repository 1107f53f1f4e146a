import {
  connectRedis,
  LeaseKeys,
  packBudgetCharge,
  packBudgetState,
  type QueueClient,
  type RedisClient,
} from '@iop/dispatch';
import { seedLeases, startRedis, startRedisCluster, waitUntil } from '@iop/dispatch/testing';
import type { StatusSnapshot } from '@iop/status';
import { parseConfigText } from '@iop/validate';
import { configPrefix, exporterYaml } from '@iop/fake-upstream';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { pushLockKey, startExporter } from './exporter';
import { boardCalls } from './testing/board-routes';
import { changedKeys, frozenCopy, keyspace } from './testing/keyspace';

const CHAT: QueueClient = { id: 'chat-ui', band: 10, weight: 1 };
const BATCH: QueueClient = { id: 'batch', band: -1, weight: 1 };
// `batch` has a token budget, so every pool provider shares the tag `pools` (docs/architecture.md, "Token budgets").
const CLIENTS = [
  { id: 'chat-ui', settings: 'priority: 10' },
  { id: 'batch', settings: 'priority: -1, tokens_per_minute: 1000' },
];
const TAG = 'pools';

/**
 * The exporter only reads (docs/architecture.md, "Status model"; README "Status"): BullMQ's `Queue`
 * would write its `meta` hash unless told not to, so this pins that a running exporter, scraped, pushing
 * and browsed on every read route of its board, leaves every key of Redis as it found it, but for its
 * own push lock, which it deletes when it closes. The queues it reads are a frozen copy of what real
 * gateway queues left (held leases and waiters of two clients), so nothing else changes them meanwhile;
 * the budgeted client's budget holds a bucket that has left its window, which reading it must not drop.
 */
describe.each([
  ['a single Redis', false],
  ['a 3-master Redis Cluster', true],
])('the exporter leaves the keyspace as it found it, on %s', (_where, cluster) => {
  let server: { urls: readonly string[]; stop(): Promise<void> };
  let reader: RedisClient;
  const closers: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    server = cluster
      ? await startRedisCluster(3)
      : await startRedis({ forceOwn: true }).then((r) => ({ urls: [r.url], stop: r.stop }));
    reader = connectRedis({ url: server.urls[0], cluster });
    reader.on('error', () => undefined);
    await new Promise((r) => reader.once('ready', r));
  }, 150_000);
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    reader?.disconnect();
    await server?.stop();
  });

  it('through /status, /metrics, the push and every read route of the queue board', async () => {
    const live = configPrefix('keyspace-live');
    const prefix = configPrefix('keyspace');
    const where = { pool: 'pool.llama-a', ...(cluster ? { shardTag: TAG } : {}) };
    closers.push(
      await seedLeases(server.urls[0], live, 'llama-a', 2, 2, {
        ...where,
        leaseClients: [CHAT, BATCH],
        waitClients: [BATCH, CHAT],
      }),
    );
    closers.push(await seedLeases(server.urls[0], live, 'llama-b', 1, 0, { ...where, leaseClients: [BATCH] }));
    expect(await frozenCopy(reader, live, prefix)).toBeGreaterThan(10);
    // batch's minute: 500 tokens 61 s ago (out of the window, not dropped yet) and 300 used 50 s ago.
    const [seconds] = await reader.time();
    const m = Number(seconds);
    await reader.hset(new LeaseKeys(prefix).budgetKey(TAG, 'batch'), {
      [`m:${m - 61}`]: packBudgetCharge({ charged: 500, reserved: 0 }),
      [`m:${m - 50}`]: packBudgetCharge({ charged: 300, reserved: 0 }),
      m: packBudgetState({ used: 800, reserved: 0, oldest: m - 61, newest: m - 50 }),
    });
    // The live queues keep renewing their leases: everything else must stay as it is.
    const read = async () => new Map([...(await keyspace(reader))].filter(([key]) => !key.startsWith(`${live}:`)));
    const before = await read();

    let pushes = 0;
    const receiver = createServer((req, res) => {
      req.resume().on('end', () => {
        pushes++;
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    closers.push(() => new Promise((r) => receiver.close(r)));
    const pushUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/status`;
    const yaml = exporterYaml({
      prefix,
      redisUrl: server.urls[0],
      cluster,
      pushUrl,
      intervalMs: 500,
      clients: CLIENTS,
    });
    const loaded = parseConfigText(yaml, {}, 'edge.yaml');
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const exporter = await startExporter({
      config: loaded.config,
      env: {},
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
    });
    try {
      const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
      expect(s.clients?.map((c) => [c.id, c.in_flight, c.queued])).toEqual([
        ['chat-ui', 1, 1],
        ['batch', 2, 1],
      ]);
      expect(s.clients?.find((c) => c.id === 'batch')?.token_budgets).toMatchObject([
        { window: 'minute', limit: 1000, reserved: 0, used: 300, remaining: 700 },
      ]);
      expect((await fetch(`${exporter.url}/metrics`)).status).toBe(200);
      const listed = (await (
        await fetch(`${exporter.url}/queues/api/queues?activeQueue=provider.llama-a&status=prioritized`)
      ).json()) as { queues: { name: string; jobs: { id: string }[] }[] };
      const jobId = listed.queues.find((q) => q.name === 'provider.llama-a')!.jobs[0].id;
      for (const call of boardCalls('provider.llama-a', jobId).read) {
        const res = await fetch(`${exporter.url}/queues${call.path}`);
        expect([call.path, res.status < 500]).toEqual([call.path, true]);
      }
      await waitUntil(() => pushes >= 2, 10_000, 'two pushes');
      expect(changedKeys(before, await read())).toEqual([pushLockKey(prefix)]);
    } finally {
      await exporter.close();
    }
    expect(changedKeys(before, await read())).toEqual([]);
  }, 60_000);
});
