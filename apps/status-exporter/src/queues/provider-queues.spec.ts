import { connectRedis, readLeaseCounts, type RedisClient } from '@iop/dispatch';
import { seedLeases, startRedis, startTcpProxy, waitUntil, type TestRedis } from '@iop/dispatch/testing';
import type { ResourceStatus, StatusSnapshot } from '@iop/status';
import { parsePrometheusText, sampleValue } from '@iop/status/testing';
import { parseConfigText } from '@iop/validate';
import { configPrefix, exporterYaml } from '@iop/fake-upstream';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { startExporter } from '../exporter';
import { ProviderQueues, type ProviderQueueEntry } from './provider-queues';

const resource = (s: StatusSnapshot, id: string): ResourceStatus =>
  s.nodes.flatMap((n) => n.resources).find((r) => r.id === id)!;
const loaded = (yaml: string) => {
  const result = parseConfigText(yaml, {}, 'edge.yaml');
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result;
};
const ready = (client: RedisClient) => new Promise((r) => client.once('ready', r));

/** The counts of the exporter's snapshot come through BullMQ's `Queue` (docs/architecture.md, "Status model"). */
describe('ProviderQueues: the provider queues through BullMQ on one shared connection', () => {
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
  const connect = async (url = redis.url) => {
    const client = connectRedis({ url, failFast: true });
    client.on('error', () => undefined);
    closers.push(async () => client.disconnect());
    await ready(client);
    return client;
  };

  it("reads what admission decides on: BullMQ's active and wait + prioritized equal the lease scripts' counts", async () => {
    const prefix = configPrefix('bull-counts');
    closers.push(await seedLeases(redis.url, prefix, 'llama-a', 2, 3));
    closers.push(await seedLeases(redis.url, prefix, 'llama-b', 1, 0));
    const client = await connect();
    const connections = async () => ((await client.client('LIST')) as string).trim().split('\n').length;
    const before = await connections();
    const queues = new ProviderQueues(client, prefix);
    closers.push(() => queues.close());
    const addresses = ['llama-a', 'llama-b', 'idle'].map((providerId) => ({ providerId, shardTag: 'pools' }));
    const counts = await queues.counts(addresses);
    expect(counts).toEqual(
      new Map([
        ['llama-a', { inFlight: 2, queued: 3 }],
        ['llama-b', { inFlight: 1, queued: 0 }],
        ['idle', { inFlight: 0, queued: 0 }],
      ]),
    );
    expect(counts).toEqual(await readLeaseCounts(client, prefix, addresses));
    expect(queues.list().map((e) => [e.providerId, e.queue.name, e.queue.opts.prefix])).toEqual([
      ['llama-a', 'provider.llama-a', `${prefix}:{pools}`],
      ['llama-b', 'provider.llama-b', `${prefix}:{pools}`],
      ['idle', 'provider.idle', `${prefix}:{pools}`],
    ]);
    // One connection for all of them: BullMQ opened none of its own.
    expect(await connections()).toBe(before);
  });

  it('keeps a Queue while its provider stays, makes a new one where it moved or came, closes the ones gone, and says so', async () => {
    const client = await connect();
    const lists: string[][] = [];
    const queues = new ProviderQueues(client, configPrefix('bull-sync'), (entries: readonly ProviderQueueEntry[]) =>
      lists.push(entries.map((e) => `${e.providerId}@${e.queue.opts.prefix!.split(':').pop()}`)),
    );
    closers.push(() => queues.close());
    queues.sync([
      { providerId: 'a', shardTag: 'pools' },
      { providerId: 'b', shardTag: 'pools' },
    ]);
    const [a, b] = queues.list().map((e) => e.queue);
    const closeB = jest.spyOn(b, 'close');
    queues.sync([
      { providerId: 'a', shardTag: 'pools' },
      { providerId: 'b', shardTag: 'pools' },
    ]);
    expect(lists).toHaveLength(1);
    queues.sync([
      { providerId: 'c', shardTag: 'pools' },
      { providerId: 'a', shardTag: 'pools' },
      { providerId: 'b', shardTag: 'pool.x' },
    ]);
    expect(lists).toEqual([
      ['a@{pools}', 'b@{pools}'],
      ['c@{pools}', 'a@{pools}', 'b@{pool.x}'],
    ]);
    expect(queues.list()[1].queue).toBe(a);
    expect(queues.list()[2].queue).not.toBe(b);
    expect(closeB).toHaveBeenCalledTimes(1);
    // Closing a Queue leaves the shared connection open.
    await closeB.mock.results[0].value;
    expect(client.status).toBe('ready');
    expect(await client.ping()).toBe('PONG');
  });

  it('gives null counts, never 0, while Redis does not answer in time, and the counts again once it does', async () => {
    const prefix = configPrefix('bull-timeout');
    closers.push(await seedLeases(redis.url, prefix, 'llama-a', 1, 1));
    const proxy = await startTcpProxy(Number(new URL(redis.url).port));
    closers.push(() => proxy.close());
    const exporter = await startExporter({
      config: loaded(exporterYaml({ prefix, redisUrl: proxy.url })).config,
      env: {},
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
    });
    closers.push(() => exporter.close());
    const status = async () => (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
    expect(resource(await status(), 'llama-a')).toMatchObject({ in_flight: 1, queued: 1 });
    proxy.holdReplies();
    const held = await status();
    expect(resource(held, 'llama-a')).toMatchObject({ in_flight: null, queued: null });
    // The clients' counts too: unknown, never 0.
    expect(held.clients).toEqual([expect.objectContaining({ id: 'anonymous', in_flight: null, queued: null })]);
    expect(held.pools).toEqual([expect.objectContaining({ pool: 'pool.llama-a', in_flight: null, queued: null })]);
    const samples = parsePrometheusText(await (await fetch(`${exporter.url}/metrics`)).text());
    expect(sampleValue(samples, 'iop_edge_status_counts_up')).toBe(0);
    expect(sampleValue(samples, 'iop_edge_resource_in_flight', { resource: 'llama-a' })).toBeUndefined();
    proxy.releaseReplies();
    await waitUntil(async () => resource(await status(), 'llama-a').in_flight === 1, 10_000, 'counts again');
  }, 30_000);

  it('follows a reload: a provider disabled leaves the counts (null) and the board; enabled again, it is back', async () => {
    const prefix = configPrefix('bull-reload');
    closers.push(await seedLeases(redis.url, prefix, 'llama-b', 2, 1));
    const yaml = exporterYaml({ prefix, redisUrl: redis.url });
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'iop-board-')), 'edge.yaml');
    writeFileSync(file, yaml);
    const first = loaded(yaml);
    const exporter = await startExporter({
      config: first.config,
      configHash: first.hash,
      configFile: file,
      env: {},
      host: '127.0.0.1',
      port: 0,
      logger: pino({ level: 'silent' }),
    });
    closers.push(() => exporter.close());
    const status = async () => (await (await fetch(`${exporter.url}/status`)).json()) as StatusSnapshot;
    const board = async () =>
      (
        (await (await fetch(`${exporter.url}/queues/api/queues`)).json()) as { queues: { displayName: string }[] }
      ).queues
        .map((q) => q.displayName)
        .sort();
    expect(await board()).toEqual(['llama-a', 'llama-b']);
    writeFileSync(file, yaml.replace('max_concurrency: 2 }', 'max_concurrency: 2, enabled: false }'));
    await exporter.reload();
    expect(await board()).toEqual(['llama-a']);
    expect(resource(await status(), 'llama-b')).toMatchObject({ state: 'disabled', in_flight: null, queued: null });
    writeFileSync(file, yaml);
    await exporter.reload();
    expect(await board()).toEqual(['llama-a', 'llama-b']);
    expect(resource(await status(), 'llama-b')).toMatchObject({ state: 'ready', in_flight: 2, queued: 1 });
  });
});
