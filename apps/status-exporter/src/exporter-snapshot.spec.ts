import { RedisProviderQueue, type Lease, type QueueClient, type QueueProvider } from '@iop/dispatch';
import { startRedis, startTcpProxy, type TcpProxy, type TestRedis } from '@iop/dispatch/testing';
import type { StatusSnapshot } from '@iop/status';
import { parseConfigText } from '@iop/validate';
import { configPrefix, exporterYaml } from '@iop/fake-upstream';
import pino from 'pino';
import { startExporter } from './exporter';

const ONE: QueueClient = { id: 'one', band: 0, weight: 1, maxInFlight: 1 };
const TWO: QueueClient = { id: 'two', band: 0, weight: 1, maxInFlight: 2 };
const FREE: QueueClient = { id: 'free', band: 0, weight: 1 };

/**
 * The exporter's `/status` reads a pool's counts and its clients' in one snapshot (docs/architecture.md,
 * "Status model"; README "Clients, priority and fair share"): while gateways
 * admit and release all the time, with clients held at their `max_in_flight` (parked requests), every
 * scrape adds up: the pool's `in_flight` is its clients', and its `queued` plus `parked` is its
 * clients' `queued` (a `parked` read apart from the pool's `queued` would come out wrong, or clamped at 0).
 */
describe('exporter /status under churn', () => {
  let redis: TestRedis;
  let link: TcpProxy;
  beforeAll(async () => {
    redis = await startRedis();
    // The exporter's link to Redis: each of its commands arrives 3 ms after the one before, as over a
    // network under load, with the gateways' commands between them.
    link = await startTcpProxy(Number(new URL(redis.url).port));
    link.paceRequests(3);
  });
  afterAll(async () => {
    await link.close();
    await redis.stop();
  });

  it("shows each pool's parked as its clients' queued minus its own, on every scrape", async () => {
    const prefix = configPrefix('exporter-snapshot');
    const pool = 'pool.llama-a';
    const providers: QueueProvider[] = [
      { providerId: 'llama-a', maxConcurrency: 3, maxQueued: 100, pool },
      { providerId: 'llama-b', maxConcurrency: 2, maxQueued: 100, pool },
    ];
    // Two gateways of one fleet.
    const gateways = [0, 1].map(
      () => new RedisProviderQueue({ redisUrl: redis.url, prefix, logger: pino({ level: 'silent' }) }),
    );
    const loaded = parseConfigText(
      exporterYaml({
        prefix,
        redisUrl: link.url,
        clients: [
          { id: 'one', settings: 'max_in_flight: 1' },
          { id: 'two', settings: 'max_in_flight: 2' },
          { id: 'free' },
        ],
      }),
      {},
      'edge.yaml',
    );
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const exporter = await startExporter({
      config: loaded.config,
      env: {},
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
    });
    try {
      for (const g of gateways) await g.configure(providers);
      const until = Date.now() + 4000;
      // 4 requests each, all the time: `one` and `two` at their cap (the rest parked), `free` without a
      // cap takes the 2 slots left for its 4 (its requests wait for a slot now and then).
      const churn = async (gateway: RedisProviderQueue, client: QueueClient) => {
        while (Date.now() < until) {
          const lease: Lease = await gateway.acquireLease({
            modelGroupKey: 'llama',
            candidates: providers,
            maxWaitMs: 20_000,
            client,
          });
          if (Math.random() < 0.3) await new Promise((r) => setTimeout(r, Math.random() * 2));
          await lease.release();
        }
      };
      const loops = [ONE, TWO, FREE].flatMap((c) => [0, 1, 2, 3].map((i) => churn(gateways[i % 2], c)));
      const broken: string[] = [];
      let scrapes = 0;
      let mostParked = 0;
      while (Date.now() < until) {
        const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
        const p = s.pools?.find((x) => x.pool === pool);
        if (!p || p.in_flight === null || p.queued === null || p.parked === null) throw new Error('counts not read');
        const held = p.clients.reduce((n, c) => n + c.in_flight, 0);
        const waiting = p.clients.reduce((n, c) => n + c.queued, 0);
        mostParked = Math.max(mostParked, p.parked);
        scrapes++;
        if (held !== p.in_flight || p.queued + p.parked !== waiting)
          broken.push(
            `pool in_flight ${p.in_flight} queued ${p.queued} parked ${p.parked}; clients in_flight ${held} queued ${waiting}`,
          );
      }
      await Promise.all(loops);
      expect({ scrapes: scrapes > 10, broken: broken.slice(0, 5), brokenCount: broken.length }).toEqual({
        scrapes: true,
        broken: [],
        brokenCount: 0,
      });
      expect(mostParked).toBeGreaterThan(0);
    } finally {
      await exporter.close();
      for (const g of gateways) await g.close();
    }
  });
});
