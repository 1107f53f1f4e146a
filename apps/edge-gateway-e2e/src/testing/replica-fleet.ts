import {
  connectRedis,
  LeaseKeys,
  leaseAddresses,
  queueProviders,
  readLeaseCounts,
  type ProviderCounts,
} from '@iop/dispatch';
import { scanKeys, uniquePrefix } from '@iop/dispatch/testing';
import { ECHO_LLM, type FakeUpstream } from '@iop/fake-upstream';
import { parseConfigText } from '@iop/validate';
import { Redis } from 'ioredis';
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

/**
 * Two pools for burst and fencing tests, on the upstream `${UPSTREAM}`, queue prefix `${PREFIX}`:
 * - `duo`: providers `a2` (max_concurrency 2, upstream model `up-a2`) and `b3` (3, `up-b3`), each
 *   with `queue.max_queued` (default 50) places in line;
 * - `single`: provider `s1` (max_concurrency 1, max_queued 1, upstream model `up-s1`).
 * `queue.max_wait_ms` defaults to 20000. Each provider has its own upstream model name, so the fake
 * upstream's per-model `max` is that provider's observed concurrency.
 */
export function burstYaml(opts: { maxQueued?: number; maxWaitMs?: number } = {}): string {
  return `
version: 1
gateway: { request_timeout_ms: 60000 }
queue: { prefix: "\${PREFIX}", max_wait_ms: ${opts.maxWaitMs ?? 20000}, max_queued: ${opts.maxQueued ?? 50} }
health: { interval_ms: 60000 }
nodes:
  - id: n
    adapters:
      - { id: up, type: openai_compat, base_url: "\${UPSTREAM}" }
    providers:
      - { id: a2, category: openai_compat, adapter: up, models: [{ name: duo, upstream: up-a2 }], max_concurrency: 2 }
      - { id: b3, category: openai_compat, adapter: up, models: [{ name: duo, upstream: up-b3 }], max_concurrency: 3 }
      - { id: s1, category: openai_compat, adapter: up, models: [{ name: single, upstream: up-s1 }], max_concurrency: 1, max_queued: 1 }
`;
}

/** The highest number of concurrent requests the upstream saw for one upstream model (= one provider). */
export const maxConcurrencySeen = (upstream: FakeUpstream, model: string) => upstream.stats().byModel[model]?.max ?? 0;

/** Several gateway processes on one Redis and one prefix, and a reader of the shared state. */
export interface ReplicaFleet {
  prefix: string;
  replicas: GatewayProcess[];
  /** The config file every replica runs. */
  configFile: string;
  /**
   * Cluster-wide counts straight from Redis (what the exporter reads, plus `tokensInFlight` for a provider with
   * `max_tokens_in_flight`); every pool provider when `ids` is omitted.
   */
  counts(ids?: string[]): Promise<Map<string, ProviderCounts>>;
  /**
   * Replica ids registered in Redis (`<prefix>:{replicas}:all`) and, of those, the ones whose
   * liveness key still exists.
   */
  liveness(): Promise<{ registered: string[]; alive: string[] }>;
  /** Keys of job hashes (waiting requests and leases) left under the prefix. */
  jobKeys(): Promise<string[]>;
  /** Starts one more replica on the same file. */
  add(): Promise<GatewayProcess>;
  /** SIGKILLs every replica (a stopped one too) and closes the reader. */
  close(): Promise<void>;
}

/**
 * Starts `n` replicas of `yaml` with `REDIS_URL=redisUrl` and a fresh prefix. On a Redis Cluster
 * (`clusterUrls`: one URL per master, `redisUrl` one of them; the file sets `queue.cluster: true`),
 * the reader follows the cluster and `jobKeys` scans every master.
 */
export async function startReplicaFleet(
  n: number,
  yaml: string,
  redisUrl: string,
  upstreamUrl: string,
  opts: { clusterUrls?: readonly string[] } = {},
): Promise<ReplicaFleet> {
  const prefix = uniquePrefix('fleet');
  const configFile = writeTempConfig(yaml);
  const env = { REDIS_URL: redisUrl, PREFIX: prefix, UPSTREAM: upstreamUrl };
  const loaded = parseConfigText(yaml, env, 'fleet.yaml');
  if (!loaded.ok) throw new Error(`fleet config invalid: ${JSON.stringify(loaded.problems, null, 2)}`);
  const config = loaded.config;
  const keys = new LeaseKeys(prefix);
  const started = await Promise.allSettled(Array.from({ length: n }, () => spawnGateway(configFile, { env })));
  const replicas = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    // No orphan keeps the test process alive when one replica cannot start.
    await Promise.all(replicas.map((r) => r.kill()));
    throw failed.reason;
  }
  const reader = opts.clusterUrls
    ? connectRedis({ url: redisUrl, cluster: true })
    : new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  reader.on('error', () => undefined);
  const defaultIds = queueProviders(config).map((p) => p.providerId);
  // Providers with `max_tokens_in_flight` read their tokens too, as the gateway's own counts do.
  const tokened = new Set(
    queueProviders(config).flatMap((p) => (p.maxTokensInFlight !== undefined ? [p.providerId] : [])),
  );
  return {
    prefix,
    replicas,
    configFile,
    // The shard tag of each provider comes from the config, as the gateway and the exporter compute it.
    counts: (ids = defaultIds) =>
      readLeaseCounts(
        reader,
        prefix,
        leaseAddresses(config, ids).map((a) => ({ ...a, tokened: tokened.has(a.providerId) })),
      ),
    liveness: async () => {
      const registered = (await reader.smembers(keys.replicasKey)).sort();
      const values = registered.length > 0 ? await reader.mget(registered.map((id) => keys.livenessKey(id))) : [];
      return { registered, alive: registered.filter((_, i) => values[i] !== null) };
    },
    jobKeys: async () =>
      (await Promise.all((opts.clusterUrls ?? [redisUrl]).map((url) => scanKeys(url, `${prefix}:`))))
        .flat()
        .filter((k) => JOB_KEY.test(k)),
    add: async () => {
      const replica = await spawnGateway(configFile, { env });
      replicas.push(replica);
      return replica;
    },
    close: async () => {
      await Promise.all(replicas.map((r) => r.kill()));
      reader.disconnect();
    },
  };
}

/** A job hash: `<prefix>:{<tag>}:provider.<id>:<replicaId>.<seq>` (lease-keys.ts). */
const JOB_KEY = /:provider\.[^:]+:[A-Za-z0-9_-]+\.\d+$/;

/** `kill -STOP`: the process stalls with its sockets open, as a frozen VM or a long GC pause would. */
export function freeze(replica: GatewayProcess): void {
  replica.child.kill('SIGSTOP');
}

/** `kill -CONT`: the stalled process resumes where it stopped. */
export function thaw(replica: GatewayProcess): void {
  replica.child.kill('SIGCONT');
}

/**
 * `in_flight` and `queued` of providers as one replica's `GET /status` reports them (its queue's `counts()`),
 * and `tokens_in_flight` as `tokensInFlight` for a provider with `max_tokens_in_flight`.
 */
export async function statusCounts(url: string, ids: readonly string[]): Promise<Map<string, ProviderCounts>> {
  const snapshot = (await (await fetch(`${url}/status`)).json()) as {
    nodes: {
      resources: { id: string; in_flight: number | null; queued: number | null; tokens_in_flight?: number | null }[];
    }[];
  };
  const resources = snapshot.nodes.flatMap((n) => n.resources);
  return new Map(
    ids.map((id) => {
      const r = resources.find((x) => x.id === id);
      if (!r || r.in_flight === null || r.queued === null) throw new Error(`GET ${url}/status has no counts for ${id}`);
      const tokens = typeof r.tokens_in_flight === 'number' ? { tokensInFlight: r.tokens_in_flight } : {};
      return [id, { inFlight: r.in_flight, queued: r.queued, ...tokens }];
    }),
  );
}

/**
 * POSTs a streaming chat completion and reads it to the end (or to an error); resolves once the
 * first body chunk is in hand, with a promise of the whole text. Never rejects on HTTP errors.
 */
export async function openStream(
  url: string,
  model: string,
  fake: Record<string, number>,
  signal?: AbortSignal,
): Promise<{ status: number; first: string; rest: Promise<{ text: string; endedAt: number }> }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'x' }], fake }),
    signal,
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const head = await reader.read();
  const first = head.done ? '' : decoder.decode(head.value, { stream: true });
  const rest = (async () => {
    let text = first;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    } catch (e) {
      text += `\n[client read failed: ${(e as Error).message}]`;
    }
    return { text, endedAt: Date.now() };
  })();
  return { status: res.status, first, rest };
}

/**
 * POSTs a chat completion for `model` to `url`; resolves to status and body text (never rejects on
 * HTTP errors). `fake` (the fake upstream's knobs) is sent only when not empty: a CLI model refuses
 * any parameter but the prompt.
 */
export async function chatOnce(
  url: string,
  model: string,
  fake: Record<string, number> = {},
  signal?: AbortSignal,
): Promise<{ status: number; body: string; headers: Headers }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model,
      messages: [{ role: 'user', content: 'x' }],
      ...(Object.keys(fake).length > 0 ? { fake } : {}),
    }),
    signal,
  });
  return { status: res.status, body: await res.text(), headers: res.headers };
}

/** Runs `total` calls of `task(i)` with at most `concurrency` at once; resolves to their results in order. */
export async function runConcurrently<T>(
  total: number,
  concurrency: number,
  task: (i: number) => Promise<T>,
): Promise<T[]> {
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
