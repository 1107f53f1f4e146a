import {
  MemoryProviderQueue,
  RedisProviderQueue,
  type ProviderQueue,
  type QueueClient,
  type TokenBudgets,
} from '@iop/dispatch';
import { startRedis, uniquePrefix, type TestRedis } from '@iop/dispatch/testing';
import { startFakeUpstream, type FakeUpstream, type FakeUpstreamOptions } from '@iop/fake-upstream';
import type { ClientStatus, StatusSnapshot } from '@iop/status';
import pino from 'pino';
import { startTestGateway, type TestGateway } from './gateway-harness';

/**
 * What the gateway's token-budget specs share (README "Token budgets: what a client sees", "Status"):
 * a config of budgeted clients, a real gateway on the memory or the Redis backend before a spec's
 * tests, and the requests and reads they make of it. For tests only.
 */

/** The backends every budget spec runs on, for `describe.each`: its name and whether it is Redis. */
export const BUDGET_BACKENDS: ReadonlyArray<readonly [string, boolean]> = [
  ['memory backend', false],
  ['Redis backend', true],
];

/** An `x-ratelimit-reset-tokens` value as OpenAI writes it (`20ms`, `1.5s`, `6m0s`, `23h59m59s`). */
export const RESET_DURATION = /^(?:\d+ms|(?:\d+h)?(?:\d+m)?\d+(?:\.\d{1,3})?s)$/;

/** A client as the queue sees it once the config gave it `tokenBudgets` (band 0, weight 1). */
export const budgetedClient = (id: string, tokenBudgets: TokenBudgets): QueueClient => ({
  id,
  band: 0,
  weight: 1,
  tokenBudgets,
});

/**
 * A config (version 1, the memory queue with `max_wait_ms` 5000: the spec's queue replaces it) of
 * one node `n` with `clients` (flow-style YAML entries of `gateway.clients`), its `adapters` (default:
 * the vLLM adapter `v` on `${UP}`), `providers` (default: `pv`, the pool of model `m` on `v`, 4 at
 * once), legacy `routes`, and more `gateway` settings (`key: value` lines).
 */
export function budgetConfig(parts: {
  clients: readonly string[];
  adapters?: readonly string[];
  providers?: readonly string[];
  routes?: readonly string[];
  gateway?: readonly string[];
}): string {
  const list = (indent: string, items: readonly string[]) => items.map((i) => `${indent}- ${i}`).join('\n');
  const adapters = parts.adapters ?? ['{ id: v, type: vllm, base_url: "${UP}" }'];
  const providers = parts.providers ?? ['{ id: pv, category: vllm, adapter: v, models: [m], max_concurrency: 4 }'];
  const routes = parts.routes?.length ? `routes:\n${list('  ', parts.routes)}\n` : '';
  return `
version: 1
gateway:
${(parts.gateway ?? []).map((line) => `  ${line}\n`).join('')}  clients:
${list('    ', parts.clients)}
queue: { backend: memory, max_wait_ms: 5000 }
nodes:
  - id: n
    adapters:
${list('      ', adapters)}
    providers:
${list('      ', providers)}
${routes}`;
}

/** A gateway a budget spec runs, filled in before its tests (`useBudgetGateway`). */
export interface BudgetGateway {
  gateway: TestGateway;
  queue: ProviderQueue;
  /** The fake upstreams, by the config variable that holds each one's URL. */
  upstreams: Record<string, FakeUpstream>;
  /** The Redis of the Redis backend; undefined on the memory backend. */
  redis?: TestRedis;
}

/**
 * Starts, before the tests of the calling `describe`, the fake `upstreams` (options by the config
 * variable that gets each one's URL), a queue (Redis when `onRedis`, with a fresh prefix from
 * `prefix`, on a Redis of its own with `ownRedis`; else memory) and a gateway on
 * `yaml`; stops them all after. Returns the object they are put in.
 */
export function useBudgetGateway(opts: {
  yaml: string;
  onRedis: boolean;
  prefix: string;
  upstreams: Record<string, FakeUpstreamOptions>;
  ownRedis?: boolean;
  /** More `${VAR}`s for the config (e.g. an upstream the spec runs itself), read when the gateway starts. */
  env?: () => Record<string, string>;
}): BudgetGateway {
  const started = { upstreams: {} } as BudgetGateway;
  beforeAll(async () => {
    started.redis = opts.onRedis ? await startRedis({ forceOwn: opts.ownRedis ?? false }) : undefined;
    for (const [name, options] of Object.entries(opts.upstreams))
      started.upstreams[name] = await startFakeUpstream(options);
    started.queue = started.redis
      ? new RedisProviderQueue({
          redisUrl: started.redis.url,
          prefix: uniquePrefix(opts.prefix),
          logger: pino({ level: 'silent' }),
        })
      : new MemoryProviderQueue();
    const env = {
      ...opts.env?.(),
      ...Object.fromEntries(Object.entries(started.upstreams).map(([name, up]) => [name, up.url])),
    };
    started.gateway = await startTestGateway(opts.yaml, env, started.queue);
  });
  afterAll(async () => {
    await started.gateway?.close();
    for (const up of Object.values(started.upstreams)) await up.close();
    await started.redis?.stop();
  });
  return started;
}

/** POSTs `body` as JSON to `/v1<path>` of `gateway` with the API key `key`. */
export const postAs = (gateway: TestGateway, key: string, path: string, body: object, signal?: AbortSignal) =>
  fetch(`${gateway.url}/v1${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
    signal,
  });

/** The clients of the gateway's `/status`. */
export const statusClients = async (gateway: TestGateway): Promise<ClientStatus[]> =>
  ((await (await fetch(`${gateway.url}/status`)).json()) as StatusSnapshot).clients ?? [];

/** `iop_edge_client_tokens_total{client,kind}` as the gateway's `/metrics` shows it now; 0 when absent. */
export async function clientTokensCounted(gateway: TestGateway, client: string, kind: string): Promise<number> {
  const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
  const line = new RegExp(`^iop_edge_client_tokens_total\\{client="${client}",kind="${kind}"\\} (\\d+)$`, 'm');
  return Number(line.exec(metrics)?.[1] ?? 0);
}

/** The `x-ratelimit-*` headers an answer carries, by name, sorted. */
export const rateLimitHeaderNames = (res: Response): string[] =>
  [...res.headers.keys()].filter((h) => h.startsWith('x-ratelimit')).sort();
