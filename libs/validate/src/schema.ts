import { z } from 'zod';
import { gatewaySchema } from './gateway-schema';
import { isRedisUrl } from './listen-address';
import { providerTokenFields } from './provider-token-settings';
import { apiKey, DEFAULT_IN_WORDS, httpUrl, id, listen, positiveMs } from './schema-fields';

/**
 * The zod schema of `edge.yaml`, version 1 (docs/architecture.md, "Settings"; keys in README "Configuration"). Shapes only: rules that relate
 * one part of the file to another (unique ids, adapter resolution, pooled vs direct) live in
 * `semantic-rules.ts`. Every object is strict so a typo is an error, never silently ignored.
 */

/** Adapter types a node can configure (docs/architecture.md, "Vocabulary"). */
export const ADAPTER_TYPES = ['cli', 'ollama', 'vllm', 'openai_compat'] as const;
export type AdapterType = (typeof ADAPTER_TYPES)[number];

/** Provider categories that are admission controlled (provider pools, docs/architecture.md "Usable pool providers"). */
export const POOL_CATEGORIES = ['ollama', 'vllm', 'openai_compat'] as const;
export type PoolCategory = (typeof POOL_CATEGORIES)[number];

/** `queue.max_queued` when the file sets none. */
export const DEFAULT_MAX_QUEUED = 100;

export { CLI_SANDBOXES, type CliSandboxMode } from './gateway-schema';

/** True when `category` is a pool category: its providers are queued and gated by `max_concurrency`. */
export function isPoolCategory(category: string): category is PoolCategory {
  return (POOL_CATEGORIES as readonly string[]).includes(category);
}

export { gatewaySchema } from './gateway-schema';

export const queueSchema = z.strictObject({
  /**
   * @defaultValue redis when redis_url is set, else memory. A URL from `--redis` or `REDIS_URL`
   * selects redis whatever this says (resolveQueueBackend; README "Configuration").
   */
  backend: z
    .enum(['redis', 'memory'])
    .optional()
    .meta({
      description:
        '`memory` (one process) or `redis` (admission in Redis, exact across replicas). A URL from `--redis` or `REDIS_URL` selects `redis` whatever this says; `redis` without any URL uses `redis://127.0.0.1:6379` (README "Queue backend").',
      [DEFAULT_IN_WORDS]: '`redis` when `redis_url` is set, else `memory`',
    }),
  redis_url: z
    .string()
    .refine(
      isRedisUrl,
      'write a redis://, rediss:// or redis+sentinel:// URL; percent-encode "/", "?" or "#" in a password',
    )
    .optional()
    .meta({
      description:
        'A `redis://`, `rediss://` (TLS) or `redis+sentinel://` URL (README "Redis requirements"); `REDIS_URL` overrides it, `--redis` overrides both.',
    }),
  /** Key prefix of every Redis key; `:` may separate namespaces but cannot end it. @defaultValue iop-edge */
  prefix: z
    .string()
    .regex(
      /^[A-Za-z0-9{][A-Za-z0-9._:{}-]*$/,
      'use letters, digits, ".", "_", "-", ":" or a Redis Cluster hash tag in braces, starting with a letter, digit or "{"',
    )
    .refine((p) => !p.endsWith(':'), 'the prefix cannot end with ":" (the gateway adds it)')
    .default('iop-edge')
    .meta({
      description:
        'Prefix of every Redis key. With `cluster: true` it holds no `{` or `}` (the gateway adds one hash tag per pool); without it, a hash tag (`{iop-edge}`) is allowed.',
    }),
  /**
   * `redis_url` is one seed node of a Redis Cluster: every pool's keys share a hash tag (one slot),
   * unrelated pools spread over the shards. @defaultValue false
   */
  cluster: z.boolean().default(false).meta({
    description:
      '`redis_url` is one seed node of a Redis Cluster: every pool\'s keys share a hash tag (one slot), pools spread over the shards (README "Production layout").',
  }),
  /** Longest a request waits for a lease. @defaultValue 60000 */
  max_wait_ms: positiveMs.default(60_000).meta({ description: 'Longest a request waits for a lease, in ms.' }),
  /** Per-provider queue bound for providers without their own. @defaultValue 100 */
  max_queued: z
    .number()
    .int()
    .nonnegative()
    .default(DEFAULT_MAX_QUEUED)
    .meta({ description: 'Waiting requests per provider, for providers that set no `max_queued` of their own.' }),
});

export const healthSchema = z.strictObject({
  /** @defaultValue 5000 */
  interval_ms: positiveMs.default(5000).meta({ description: 'Period of the active provider probes, in ms.' }),
  /** @defaultValue 2000 */
  timeout_ms: positiveMs.default(2000).meta({ description: 'Timeout of one probe, in ms.' }),
  /** Consecutive failures before a provider is unhealthy. @defaultValue 3 */
  unhealthy_after: z
    .number()
    .int()
    .positive()
    .default(3)
    .meta({ description: 'Consecutive failures (of probes, or of requests) before a provider is unhealthy.' }),
  /** Consecutive successes before it is healthy again. @defaultValue 2 */
  healthy_after: z
    .number()
    .int()
    .positive()
    .default(2)
    .meta({ description: 'Consecutive probe successes before a provider the probe took out is healthy again.' }),
  /**
   * A provider turned unhealthy by failing requests (whatever its probe says) sits out this long,
   * in ms, then takes one trial request: a success brings it back, a failure starts another
   * cooldown. @defaultValue 30000
   */
  cooldown_ms: positiveMs.default(30_000).meta({
    description:
      'A provider taken out by failing requests (whatever its probe says) sits out this long, in ms, then one trial request decides: a success brings it back, a failure starts another cooldown (README "Provider health").',
  }),
});

export const statusSchema = z.strictObject({
  /** @defaultValue 127.0.0.1:9464 */
  listen: listen
    .default('127.0.0.1:9464')
    .meta({ description: 'Where the status exporter listens, as `host:port`; `--listen` overrides it.' }),
  push_url: httpUrl
    .optional()
    .meta({ description: 'Where the status exporter POSTs its snapshot (`http://` or `https://`); none = no push.' }),
  /** @defaultValue 5000 */
  interval_ms: positiveMs
    .default(5000)
    .meta({ description: 'How often the status exporter takes (and pushes) a snapshot, in ms.' }),
  /**
   * Keys for `/status`, `/metrics` and the exporter's dashboard (gateway and exporter), sent as
   * `Authorization: Bearer <key>` or as the password of HTTP Basic auth; empty = open. Probes
   * (`/healthz`, `/readyz`) stay open. @defaultValue []
   */
  api_keys: z.array(apiKey).default([]).meta({
    description:
      "Keys for `/status`, `/metrics` (gateway and exporter) and the exporter's dashboard, sent as `Authorization: Bearer <key>` or as the password of HTTP Basic auth; empty = open. `/healthz` and `/readyz` stay open.",
  }),
});

/**
 * `keep_alive_timeout_ms` of an HTTP adapter when the file sets none: 3 s, below the idle timeouts
 * of the servers behind adapters (uvicorn and so vLLM: 5 s; Node: 5 s), so the gateway closes an
 * idle socket before the server does (README "Connections to an upstream").
 */
export const DEFAULT_UPSTREAM_KEEP_ALIVE_MS = 3000;

/** Longest `keep_alive_timeout_ms` of an HTTP adapter: 10 minutes (undici's own cap on a server's hint). */
export const MAX_UPSTREAM_KEEP_ALIVE_MS = 600_000;

const keepAliveFix = `write a whole number of milliseconds from 1 to ${MAX_UPSTREAM_KEEP_ALIVE_MS}, below the upstream server's own idle timeout, e.g. keep_alive_timeout_ms: ${DEFAULT_UPSTREAM_KEEP_ALIVE_MS}`;

/**
 * `close_wait_ms` of an HTTP adapter when the file sets none: 2 s. A server closes its side as it
 * reads the gateway's close (uvicorn, Node and Go servers do at once), so the wait is as long as the
 * server's event loop takes to get to it.
 */
export const DEFAULT_UPSTREAM_CLOSE_WAIT_MS = 2000;

/** Longest `close_wait_ms` of an HTTP adapter: 1 minute. */
export const MAX_UPSTREAM_CLOSE_WAIT_MS = 60_000;

const closeWaitFix = `write a whole number of milliseconds from 1 to ${MAX_UPSTREAM_CLOSE_WAIT_MS}, e.g. close_wait_ms: ${DEFAULT_UPSTREAM_CLOSE_WAIT_MS}`;

/** `id` of an adapter (both kinds). */
const adapterId = id.meta({ description: 'Adapter id, unique within the node (letters, digits, `.`, `_`, `-`).' });

const httpAdapterFields = {
  id: adapterId,
  base_url: httpUrl.meta({
    description: "The server's `/v1` URL, or its address without it; userinfo in it is sent as HTTP Basic auth.",
  }),
  api_key: z.string().optional().meta({ description: 'Bearer token sent to the upstream.' }),
  /** @defaultValue true */
  enabled: z.boolean().default(true).meta({ description: 'A disabled adapter serves nothing.' }),
  /**
   * How long a connection to the upstream may stay idle in the gateway's pool before the gateway
   * closes it, in ms; a server's `Keep-Alive: timeout=<s>` hint shortens it. Keep it below the
   * server's own idle timeout, so the server never closes a socket the gateway is about to reuse.
   * @defaultValue 3000
   */
  keep_alive_timeout_ms: z
    .number({ error: keepAliveFix })
    .int(keepAliveFix)
    .min(1, keepAliveFix)
    .max(MAX_UPSTREAM_KEEP_ALIVE_MS, keepAliveFix)
    .default(DEFAULT_UPSTREAM_KEEP_ALIVE_MS)
    .meta({
      description:
        "How long a connection to the upstream may stay idle in the gateway's pool, in ms, before the gateway closes it (a server's `Keep-Alive: timeout` hint shortens it); keep it below the server's own idle timeout (README \"Connections to an upstream\").",
    }),
  /**
   * How long the lease of a call the gateway cut (client gone, timeout, fence, a cap) waits for the
   * upstream to close its side of the connection, in ms: the gateway closes by halves and the
   * server's own close says it has seen the call end, so the next call never reaches it first
   * (README "Connections to an upstream"). A server that never closes its side holds the slot this long.
   * @defaultValue 2000
   */
  close_wait_ms: z
    .number({ error: closeWaitFix })
    .int(closeWaitFix)
    .min(1, closeWaitFix)
    .max(MAX_UPSTREAM_CLOSE_WAIT_MS, closeWaitFix)
    .default(DEFAULT_UPSTREAM_CLOSE_WAIT_MS)
    .meta({
      description:
        'How long the lease of a call the gateway cut (client gone, timeout, a cap) waits for the upstream to close its side of the connection, in ms, so the next call never reaches it first; a server that never closes holds the slot this long (README "Connections to an upstream").',
    }),
};

export const httpAdapterSchema = z.strictObject({
  ...httpAdapterFields,
  type: z.enum(['ollama', 'vllm', 'openai_compat']).meta({
    description: 'An HTTP server: Ollama, vLLM, or any other OpenAI-compatible API (`openai_compat`).',
  }),
});

export const cliAdapterSchema = z.strictObject({
  id: adapterId,
  type: z.literal('cli').meta({ description: 'A local program, run once per request (README "Adapters").' }),
  /** argv array; never run through a shell. */
  command: z
    .array(z.string().min(1))
    .min(1, 'give the program and its arguments, e.g. ["my-llm", "--quiet"]')
    .meta({ description: 'The program and its arguments (an argv array); never run through a shell.' }),
  /** Kill the process group after this long. @defaultValue 120000 */
  timeout_ms: positiveMs
    .default(120_000)
    .meta({ description: "The program's process group is killed after this long, in ms." }),
  /** @defaultValue true */
  enabled: z.boolean().default(true).meta({ description: 'A disabled adapter serves nothing.' }),
  /**
   * The program's environment beyond the base (`PATH`, `HOME`, `LANG`, `TZ` of the gateway, when
   * set): name → value; values may use `${VAR}`. Nothing else of the gateway's environment is
   * passed on. @defaultValue {}
   */
  env: z
    .record(
      z
        .string()
        .regex(
          /^[A-Za-z_][A-Za-z0-9_]*$/,
          'an environment variable name has letters, digits and "_", not starting with a digit',
        ),
      z.string(),
    )
    .default({})
    .meta({
      description:
        "The program's environment beyond `PATH`, `HOME`, `LANG` and `TZ` of the gateway: name → value, values may use `${VAR}`. Nothing else of the gateway's environment is passed on.",
    }),
  /**
   * Most stdout a non-streamed answer may hold, in bytes; more is a 502 and the process group is
   * killed. Streamed answers pass in constant memory whatever their length. @defaultValue 16777216 (16 MiB)
   */
  max_output_bytes: z
    .number()
    .int()
    .positive()
    .default(16 * 1024 * 1024)
    .meta({
      description:
        'Most stdout a non-streamed answer may hold, in bytes; more is a 502 and the process group is killed. Streamed answers pass in constant memory whatever their length.',
    }),
  /**
   * How the messages are written on stdin: `text` (`Role: text` blocks, role labels inside a text
   * escaped) or `jsonl` (one `{"role","content"}` JSON object per line). @defaultValue text
   */
  prompt_format: z.enum(['text', 'jsonl']).default('text').meta({
    description:
      'How the messages are written on stdin: `text` (`Role: text` blocks, role labels inside a text escaped) or `jsonl` (one `{"role","content"}` JSON object per line).',
  }),
  /**
   * Most runs of this adapter's program at once, over every provider and route that uses the
   * adapter; more wait (`max_waiting`). Held in this process only, never in Redis. @defaultValue 4
   */
  max_concurrency: z
    .number({ error: 'write a whole number of runs, 1 or more, e.g. max_concurrency: 4' })
    .int('write a whole number of runs, 1 or more, e.g. max_concurrency: 4')
    .min(1, 'set max_concurrency to 1 or more: the most runs of this program at once')
    .default(4)
    .meta({
      description:
        "Most runs of this adapter's program at once, over every provider and route that uses the adapter; more wait (`max_waiting`). Held in this process only, never in Redis.",
    }),
  /**
   * Requests that wait, first come first served, for a run of this adapter when `max_concurrency`
   * runs are going; one more gets 429 `rate_limit_exceeded` with `Retry-After` at once. A wait ends
   * at `gateway.request_timeout_ms` (504) or when the client goes. @defaultValue 16
   */
  max_waiting: z
    .number({ error: 'write a whole number of requests, 0 or more, e.g. max_waiting: 16' })
    .int('write a whole number of requests, 0 or more, e.g. max_waiting: 16')
    .min(0, 'set max_waiting to 0 or more (0: no waiting, 429 at once)')
    .default(16)
    .meta({
      description:
        'Requests that wait, first come first served, for a run when `max_concurrency` runs are going; one more gets 429 `rate_limit_exceeded` at once. A wait ends at `gateway.request_timeout_ms` (504) or when the client goes.',
    }),
});

export const adapterSchema = z.discriminatedUnion('type', [httpAdapterSchema, cliAdapterSchema], {
  error: `type must be one of ${ADAPTER_TYPES.join(', ')}`,
});

/** A model a provider serves: a bare public name, or `{name, upstream}` to rename it upstream. */
export const modelSchema = z.union(
  [
    z.string().min(1),
    z.strictObject({
      name: z.string().min(1).meta({ description: 'The public model name clients ask for.' }),
      upstream: z.string().min(1).meta({ description: 'The model name sent upstream.' }),
    }),
  ],
  {
    error: 'write a model name, or {name: <public name>, upstream: <upstream name>}',
  },
);

export const providerSchema = z.strictObject({
  /** Unique across the whole file. */
  id: id.meta({ description: 'Provider id, unique across the whole file (letters, digits, `.`, `_`, `-`).' }),
  category: z.enum(ADAPTER_TYPES, { error: `category must be one of ${ADAPTER_TYPES.join(', ')}` }).meta({
    description:
      "`vllm`, `ollama`, `openai_compat` (pools: queued and admission controlled) or `cli` (direct); equals the adapter's type.",
  }),
  /** An adapter id on this node, or a type when exactly one enabled adapter of it exists here. */
  adapter: z.string().min(1).meta({
    description:
      'An adapter id on the same node, or a type name when exactly one enabled adapter of that type exists there.',
  }),
  models: z.array(modelSchema).min(1, 'list at least one model').meta({
    description:
      'Model names clients ask for, or `{name, upstream}` to send another name upstream; each name once per provider.',
  }),
  /** Required for pool categories. */
  max_concurrency: z
    .number()
    .int()
    .optional()
    .meta({
      description:
        'Leases the provider grants at once across every replica, 1 or more. Required for pools; refused on `cli` providers (set it on their adapter).',
      [DEFAULT_IN_WORDS]: 'required for pools',
    }),
  /** Overrides queue.max_queued for this provider. */
  max_queued: z
    .number()
    .int()
    .nonnegative()
    .optional()
    .meta({
      description: "Waiting requests this provider's queue holds; overrides `queue.max_queued`.",
      [DEFAULT_IN_WORDS]: '`queue.max_queued`',
    }),
  ...providerTokenFields,
  /** @defaultValue true */
  enabled: z.boolean().default(true).meta({ description: 'A disabled provider takes no requests.' }),
});

export const nodeSchema = z.strictObject({
  id: id.meta({ description: 'Node id, unique in the file (letters, digits, `.`, `_`, `-`).' }),
  adapters: z
    .array(adapterSchema)
    .default([])
    .meta({ description: 'How the node reaches its upstreams: HTTP servers, or local programs (`cli`).' }),
  providers: z.array(providerSchema).default([]).meta({
    description: "The node's resource catalog: the models it serves, through which adapter, within which limits.",
  }),
});

export const routeSchema = z.strictObject({
  model: z.string().min(1).meta({ description: 'The model name clients ask for.' }),
  node: z.string().min(1).meta({ description: 'Id of the node that serves it.' }),
  adapter: z.string().min(1).meta({ description: 'Id of the adapter on that node.' }),
  upstream: z
    .string()
    .min(1)
    .optional()
    .meta({ description: 'The model name sent upstream.', [DEFAULT_IN_WORDS]: 'the same as `model`' }),
});

export const edgeConfigSchema = z.strictObject({
  version: z.literal(1, { error: 'version must be 1' }).meta({ description: 'Version of the file format.' }),
  gateway: gatewaySchema.prefault({}).meta({
    description: 'The HTTP front: listen address, client keys and clients, request limits and timeouts.',
  }),
  queue: queueSchema.prefault({}).meta({ description: 'The admission queue: its backend and bounds.' }),
  health: healthSchema.prefault({}).meta({
    description: 'Active provider probes, and the cooldown after failing requests (README "Provider health").',
  }),
  status: statusSchema.prefault({}).meta({
    description: 'The status exporter, and the keys of `/status` and `/metrics` (README "Status").',
  }),
  nodes: z.array(nodeSchema).min(1, 'declare at least one node').meta({
    description: 'The machines (or groups of upstreams) the gateway serves from: their adapters and providers.',
  }),
  routes: z.array(routeSchema).default([]).meta({
    description: 'Legacy direct routes `{model, node, adapter, upstream?}` for nodes without a catalog entry.',
  }),
});

/** The file as parsed, defaults applied (before semantic checks). */
export type EdgeConfigInput = z.input<typeof edgeConfigSchema>;
export type EdgeConfig = z.output<typeof edgeConfigSchema>;
export type GatewaySettings = EdgeConfig['gateway'];
export type QueueSettings = EdgeConfig['queue'];
export type HealthSettings = EdgeConfig['health'];
export type StatusSettings = EdgeConfig['status'];
export type NodeConfig = EdgeConfig['nodes'][number];
export type AdapterConfig = NodeConfig['adapters'][number];
export type HttpAdapterConfig = Extract<AdapterConfig, { type: 'ollama' | 'vllm' | 'openai_compat' }>;
export type CliAdapterConfig = Extract<AdapterConfig, { type: 'cli' }>;
export type ProviderConfig = NodeConfig['providers'][number];
export type ModelEntry = ProviderConfig['models'][number];
export type RouteConfig = EdgeConfig['routes'][number];

/** Normalises a catalog model entry to `{name, upstream}` (upstream = name when not renamed). */
export function modelNames(entry: ModelEntry): { name: string; upstream: string } {
  return typeof entry === 'string' ? { name: entry, upstream: entry } : entry;
}
