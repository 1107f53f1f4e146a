import { DEFAULT_SHARD_TAG, readLeaseCounts, type ProviderCounts } from '@iop/dispatch';
import { uniquePrefix } from '@iop/dispatch/testing';
import { Redis } from 'ioredis';
import { ECHO_LLM } from './fixtures';
import { spawnGateway, writeTempConfig, type GatewayProcess } from './gateway-process';

/**
 * A pool `pool` of two providers (`p3`: max_concurrency 3, upstream model `up-3`; `p5`: 5, `up-5`)
 * and a pool `one` (`solo`: 1, `up-1`, max_queued 2) on the upstream `${UPSTREAM}`, plus a CLI model
 * `echo`; queue prefix `${PREFIX}`. Each provider has its own upstream model name, so the fake
 * upstream's per-model `max` is the provider's observed concurrency.
 */
export function replicaYaml(opts: { maxWaitMs?: number; requestTimeoutMs?: number } = {}): string {
  return `
version: 1
gateway: { request_timeout_ms: ${opts.requestTimeoutMs ?? 30000} }
queue: { prefix: "\${PREFIX}", max_wait_ms: ${opts.maxWaitMs ?? 30000}, max_queued: 500 }
health: { interval_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: up, type: openai_compat, base_url: "\${UPSTREAM}" }
      - { id: echo, type: cli, command: ["node", ${JSON.stringify(ECHO_LLM)}] }
    providers:
      - { id: p3, category: openai_compat, adapter: up, models: [{ name: pool, upstream: up-3 }], max_concurrency: 3 }
      - { id: p5, category: openai_compat, adapter: up, models: [{ name: pool, upstream: up-5 }], max_concurrency: 5 }
      - { id: solo, category: openai_compat, adapter: up, models: [{ name: one, upstream: up-1 }], max_concurrency: 1, max_queued: 2 }
      - { id: echo-cli, category: cli, adapter: echo, models: [echo] }
`;
}

/** Several gateway processes on one Redis and one prefix, and a reader of the shared counts. */
export interface ReplicaFleet {
  prefix: string;
  replicas: GatewayProcess[];
  /** Cluster-wide counts straight from Redis (what the exporter reads). */
  counts(ids?: string[]): Promise<Map<string, ProviderCounts>>;
  /** Starts one more replica on the same file. */
  add(): Promise<GatewayProcess>;
  close(): Promise<void>;
}

/** Starts `n` replicas of `yaml` with `REDIS_URL=redisUrl` and a fresh prefix. */
export async function startReplicaFleet(n: number, yaml: string, redisUrl: string, upstreamUrl: string): Promise<ReplicaFleet> {
  const prefix = uniquePrefix('fleet');
  const file = writeTempConfig(yaml);
  const env = { REDIS_URL: redisUrl, PREFIX: prefix, UPSTREAM: upstreamUrl };
  const replicas = await Promise.all(Array.from({ length: n }, () => spawnGateway(file, { env })));
  const reader = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  reader.on('error', () => undefined);
  return {
    prefix,
    replicas,
    counts: (ids = ['p3', 'p5', 'solo']) => readLeaseCounts(reader, prefix, ids.map((providerId) => ({ providerId, shardTag: DEFAULT_SHARD_TAG }))),
    add: async () => {
      const replica = await spawnGateway(file, { env });
      replicas.push(replica);
      return replica;
    },
    close: async () => {
      await Promise.all(replicas.map((r) => r.kill()));
      reader.disconnect();
    },
  };
}

/** POSTs a chat completion for `model` to `url`; resolves to status and body text (never rejects on HTTP errors). */
export async function chatOnce(
  url: string,
  model: string,
  fake: Record<string, number> = {},
  signal?: AbortSignal,
): Promise<{ status: number; body: string; headers: Headers }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }], fake }),
    signal,
  });
  return { status: res.status, body: await res.text(), headers: res.headers };
}

/** Runs `total` calls of `task(i)` with at most `concurrency` at once; resolves to their results in order. */
export async function runConcurrently<T>(total: number, concurrency: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(total);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const i = next++;
        results[i] = await task(i);
      }
    }),
  );
  return results;
}
