import { connectRedis, LeaseKeys, RedisProviderQueue, type QueueClient } from '@iop/dispatch';
import { seedLeases, startRedis, type TestRedis } from '@iop/dispatch/testing';
import { RESOURCE_METRICS, type StatusSnapshot } from '@iop/status';
import { parsePrometheusText, sampleValue } from '@iop/status/testing';
import { parseConfigText } from '@iop/validate';
import { configPrefix, exporterYaml } from '@iop/fake-upstream';
import pino from 'pino';
import { startExporter, type RunningExporter } from './exporter';

const CHAT: QueueClient = { id: 'chat-ui', band: 10, weight: 1 };
const BATCH: QueueClient = { id: 'nightly-batch', band: -1, weight: 2, maxInFlight: 4 };
const CLIENTS = [
  { id: 'chat-ui', settings: 'priority: 10' },
  { id: 'nightly-batch', settings: 'priority: -1, weight: 2, max_in_flight: 4' },
  { id: 'idle', settings: 'max_queued: 5' },
];
const RESEARCH: QueueClient = {
  id: 'research',
  band: 0,
  weight: 1,
  tokenBudgets: { perMinute: 50_000, perDay: 900_000 },
};
const BUDGETED = [...CLIENTS, { id: 'research', settings: 'tokens_per_minute: 50000, tokens_per_day: 900000' }];

/** Charges `tokens` to the client's budget the way a gateway's release does: one lease on `providerId`, released with that use. */
async function chargeBudget(redisUrl: string, prefix: string, providerId: string, client: QueueClient, tokens: number) {
  const queue = new RedisProviderQueue({ redisUrl, prefix, logger: pino({ level: 'silent' }) });
  try {
    const provider = { providerId, maxConcurrency: 1, maxQueued: 1, pool: 'pool.llama-a' };
    await queue.configure([provider]);
    const lease = await queue.acquireLease({ modelGroupKey: 'seed', candidates: [provider], maxWaitMs: 5000, client });
    await lease.release({ tokens, reported: true });
  } finally {
    await queue.close();
  }
}

/**
 * The exporter's `/status` carries `pools` and `clients` as the gateway's does, with fleet-wide
 * counts from Redis (README "Status"; docs/architecture.md, "Clients, priority and fair share"), and
 * its `/metrics` the gauges `iop_edge_client_in_flight` / `iop_edge_client_queued{pool,client}`.
 */
describe('clients in the exporter', () => {
  let redis: TestRedis;
  const closers: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });
  afterAll(async () => {
    await redis.stop();
  });
  const start = async (yaml: string): Promise<RunningExporter> => {
    const loaded = parseConfigText(yaml, {}, 'edge.yaml');
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const exporter = await startExporter({
      config: loaded.config,
      env: {},
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
    });
    closers.push(() => exporter.close());
    return exporter;
  };

  it('GET /status: every configured client with band, weight, caps and fleet-wide counts; each pool with its clients', async () => {
    const prefix = configPrefix('exporter-clients');
    const pool = 'pool.llama-a';
    // What gateways hold now: llama-a full (chat-ui 1, batch 2) with a batch and a chat-ui request waiting; llama-b 1 batch.
    closers.push(
      await seedLeases(redis.url, prefix, 'llama-a', 3, 2, {
        pool,
        leaseClients: [CHAT, BATCH, BATCH],
        waitClients: [BATCH, CHAT],
      }),
    );
    closers.push(await seedLeases(redis.url, prefix, 'llama-b', 1, 0, { pool, leaseClients: [BATCH] }));
    const exporter = await start(exporterYaml({ prefix, redisUrl: redis.url, clients: CLIENTS }));
    const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
    expect(s.clients).toEqual([
      // Without their own max_queued: half of gateway.max_connections (4096).
      { id: 'chat-ui', band: 10, weight: 1, max_in_flight: null, max_queued: 2048, in_flight: 1, queued: 1 },
      { id: 'nightly-batch', band: -1, weight: 2, max_in_flight: 4, max_queued: 2048, in_flight: 3, queued: 1 },
      { id: 'idle', band: 0, weight: 1, max_in_flight: null, max_queued: 5, in_flight: 0, queued: 0 },
    ]);
    expect(s.pools).toEqual([
      {
        pool,
        providers: ['llama-a', 'llama-b'],
        in_flight: 4,
        queued: 2,
        parked: 0,
        clients: [
          { client: 'chat-ui', band: 10, in_flight: 1, queued: 1 },
          { client: 'nightly-batch', band: -1, in_flight: 3, queued: 1 },
        ],
      },
    ]);

    const samples = parsePrometheusText(await (await fetch(`${exporter.url}/metrics`)).text());
    const of = (client: string) => ({ pool, client });
    expect(sampleValue(samples, RESOURCE_METRICS.clientInFlight, of('chat-ui'))).toBe(1);
    expect(sampleValue(samples, RESOURCE_METRICS.clientQueued, of('chat-ui'))).toBe(1);
    expect(sampleValue(samples, RESOURCE_METRICS.clientInFlight, of('nightly-batch'))).toBe(3);
    expect(sampleValue(samples, RESOURCE_METRICS.clientQueued, of('nightly-batch'))).toBe(1);
    // A client with nothing held or waiting has no series (bounded by the config, as on the gateway).
    expect(sampleValue(samples, RESOURCE_METRICS.clientInFlight, of('idle'))).toBeUndefined();
  });

  it("shows a client's requests held at its max_in_flight as the pool's parked, not its queued", async () => {
    const prefix = configPrefix('exporter-parked');
    const pool = 'pool.llama-a';
    // nightly-batch holds its 4 leases (max_in_flight 4) in the pool; 2 more of its requests are parked.
    closers.push(await seedLeases(redis.url, prefix, 'llama-a', 3, 0, { pool, leaseClients: [BATCH, BATCH, BATCH] }));
    closers.push(
      await seedLeases(redis.url, prefix, 'llama-b', 1, 0, {
        pool,
        leaseClients: [BATCH],
        parked: { client: BATCH, count: 2 },
      }),
    );
    const exporter = await start(exporterYaml({ prefix, redisUrl: redis.url, clients: CLIENTS }));
    const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
    expect(s.pools).toEqual([
      {
        pool,
        providers: ['llama-a', 'llama-b'],
        in_flight: 4,
        queued: 0,
        parked: 2,
        clients: [{ client: 'nightly-batch', band: -1, in_flight: 4, queued: 2 }],
      },
    ]);
    expect(s.clients?.find((c) => c.id === 'nightly-batch')).toMatchObject({ in_flight: 4, queued: 2 });
  });

  it('without gateway.clients every request is the anonymous client, and its counts show', async () => {
    const prefix = configPrefix('exporter-anonymous');
    closers.push(await seedLeases(redis.url, prefix, 'llama-b', 2, 1, { pool: 'pool.llama-a' }));
    const exporter = await start(exporterYaml({ prefix, redisUrl: redis.url }));
    const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
    expect(s.clients).toEqual([
      { id: 'anonymous', band: 0, weight: 1, max_in_flight: null, max_queued: null, in_flight: 2, queued: 1 },
    ]);
    expect(s.pools?.[0].clients).toEqual([{ client: 'anonymous', band: 0, in_flight: 2, queued: 1 }]);
  });

  it("GET /status and /metrics: a budgeted client's windows read from Redis, used and reserved apart; no field without a budget", async () => {
    const prefix = configPrefix('exporter-budgets');
    await chargeBudget(redis.url, prefix, 'llama-a', RESEARCH, 700);
    // A lease of research held now: it reserves the completion default (1024 tokens; no weight given).
    closers.push(
      await seedLeases(redis.url, prefix, 'llama-a', 1, 0, { pool: 'pool.llama-a', leaseClients: [RESEARCH] }),
    );
    const exporter = await start(exporterYaml({ prefix, redisUrl: redis.url, clients: BUDGETED }));
    const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
    const research = s.clients?.find((c) => c.id === 'research');
    expect(research).toMatchObject({ in_flight: 1, queued: 0 });
    expect(research?.token_budgets).toEqual([
      { window: 'minute', limit: 50_000, reserved: 1024, used: 700, remaining: 48_276, reset_ms: expect.any(Number) },
      { window: 'day', limit: 900_000, reserved: 1024, used: 700, remaining: 898_276, reset_ms: expect.any(Number) },
    ]);
    const [minute, day] = research!.token_budgets!;
    expect(minute.reset_ms).toBeGreaterThan(55_000);
    expect(minute.reset_ms).toBeLessThanOrEqual(61_000);
    expect(day.reset_ms).toBeGreaterThan(86_300_000);
    for (const id of ['chat-ui', 'nightly-batch', 'idle'])
      expect(s.clients?.find((c) => c.id === id)).not.toHaveProperty('token_budgets');

    const samples = parsePrometheusText(await (await fetch(`${exporter.url}/metrics`)).text());
    const of = (window: string) => ({ client: 'research', window });
    expect(sampleValue(samples, RESOURCE_METRICS.clientTokensLimit, of('minute'))).toBe(50_000);
    expect(sampleValue(samples, RESOURCE_METRICS.clientTokensReserved, of('minute'))).toBe(1024);
    expect(sampleValue(samples, RESOURCE_METRICS.clientTokensUsed, of('day'))).toBe(700);
    expect(sampleValue(samples, RESOURCE_METRICS.clientTokensRemaining, of('day'))).toBe(898_276);
    expect(sampleValue(samples, RESOURCE_METRICS.clientTokensRemaining, { client: 'chat-ui' })).toBeUndefined();
  });

  it('shows null budgets, never made-up ones, when they cannot be read: the counts still show when Redis answers them', async () => {
    const prefix = configPrefix('exporter-budgets-broken');
    closers.push(
      await seedLeases(redis.url, prefix, 'llama-a', 1, 0, { pool: 'pool.llama-a', leaseClients: [RESEARCH] }),
    );
    // A budget hash that is not a hash: budgets.lua fails (WRONGTYPE), the counts' reads do not.
    const writer = connectRedis({ url: redis.url });
    closers.push(async () => writer.disconnect());
    await writer.set(new LeaseKeys(prefix).budgetKey('pools', 'research'), 'not a hash');
    const exporter = await start(exporterYaml({ prefix, redisUrl: redis.url, clients: BUDGETED }));
    const s = (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
    expect(s.clients?.find((c) => c.id === 'research')).toMatchObject({ in_flight: 1, token_budgets: null });
    const samples = parsePrometheusText(await (await fetch(`${exporter.url}/metrics`)).text());
    expect(sampleValue(samples, 'iop_edge_status_counts_up')).toBe(1);
    expect(sampleValue(samples, RESOURCE_METRICS.clientTokensRemaining, { client: 'research' })).toBeUndefined();

    const down = await start(exporterYaml({ prefix, redisUrl: 'redis://127.0.0.1:1', clients: BUDGETED }));
    const d = (await (await fetch(`${down.url}/status`)).json()) as StatusSnapshot;
    expect(d.clients?.find((c) => c.id === 'research')).toMatchObject({ in_flight: null, token_budgets: null });
  });
});
