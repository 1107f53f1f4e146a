import { z } from 'zod';
import { isRedisUrl } from './listen-address';

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

/** True when `category` is a pool category: its providers are queued and gated by `max_concurrency`. */
export function isPoolCategory(category: string): category is PoolCategory {
  return (POOL_CATEGORIES as readonly string[]).includes(category);
}

const id = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'use letters, digits, ".", "_" or "-", starting with a letter or digit');

/** `host:port`, e.g. `127.0.0.1:8080` or `[::1]:8080`. */
const listen = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'write it as host:port, e.g. 127.0.0.1:8080')
  .refine((text) => Number(text.slice(text.lastIndexOf(':') + 1)) <= 65535, 'the port must be from 0 to 65535');

const httpUrl = z.url({ protocol: /^https?$/, error: 'write a full http:// or https:// URL' });
const positiveMs = z.number().int().positive();

/**
 * A key a client presents as `Authorization: Bearer <key>`: printable ASCII without spaces. HTTP
 * carries header values as ASCII and clients trim surrounding spaces, so any other key could never
 * match (README "Security").
 */
const apiKey = z
  .string()
  .min(1, 'an API key cannot be empty')
  .regex(
    /^[\x21-\x7e]+$/,
    'an API key must be printable ASCII without spaces (no accents or other non-ASCII characters, no surrounding or inner spaces): a client sends it in an HTTP header, so any other key could never match',
  );

/** A browser origin: `scheme://host[:port]`, no path, as browsers send it in `Origin`. */
const origin = z
  .string()
  .regex(
    /^https?:\/\/(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/,
    'write an origin as scheme://host[:port], without a path or trailing slash, e.g. https://chat.example.com',
  );

export const gatewaySchema = z.strictObject({
  /** @defaultValue 127.0.0.1:8080 */
  listen: listen.default('127.0.0.1:8080'),
  /** Client API keys (printable ASCII, no spaces); absent or empty = no client auth. */
  api_keys: z.array(apiKey).default([]),
  /** @defaultValue 4194304 (4 MiB) */
  max_body_bytes: z
    .number()
    .int()
    .positive()
    .default(4 * 1024 * 1024),
  /** Bounds the time to the upstream's first byte, not a healthy stream. @defaultValue 120000 */
  request_timeout_ms: positiveMs.default(120_000),
  /**
   * A stream in which no byte moves for this long, in ms (the upstream sends nothing, or the client
   * accepts nothing), is cut: the upstream call is aborted and the lease released. @defaultValue 60000
   */
  stream_idle_timeout_ms: positiveMs.default(60_000),
  /**
   * Largest non-streamed answer read from an upstream, in bytes; a larger one is a 502. Streams are
   * passed through in constant memory and are not capped. @defaultValue 67108864 (64 MiB)
   */
  max_response_bytes: z
    .number()
    .int()
    .positive()
    .default(64 * 1024 * 1024),
  /**
   * Open client connections this process accepts at once; further connections are closed as they
   * arrive, so slow or idle clients cannot use up the process's file descriptors. @defaultValue 4096
   */
  max_connections: z.number().int().positive().default(4096),
  /**
   * Longest a client may take to send a request's headers, in ms; a slower connection is closed
   * (408). @defaultValue 10000
   */
  header_timeout_ms: positiveMs.default(10_000),
  /**
   * Longest a client may take to send a request's body once its headers are in, in ms; a slower
   * connection is closed (408). @defaultValue 30000
   */
  body_timeout_ms: positiveMs.default(30_000),
  /** Cross-origin (browser) access to the `/v1` API. */
  cors: z
    .strictObject({
      /**
       * Origins (`https://host[:port]`) whose pages may call the API from a browser; empty = no
       * cross-origin access (no CORS headers, preflights refused). @defaultValue []
       */
      allowed_origins: z.array(origin).default([]),
    })
    .prefault({}),
  /**
   * Send `x-iop-node` and `x-iop-resource` (the node and provider that served) on answers; false
   * drops both so clients learn nothing of the topology. @defaultValue true
   */
  topology_headers: z.boolean().default(true),
});

export const queueSchema = z.strictObject({
  /**
   * @defaultValue redis when redis_url is set, else memory. A URL from `--redis` or `REDIS_URL`
   * selects redis whatever this says (resolveQueueBackend; README "Configuration").
   */
  backend: z.enum(['redis', 'memory']).optional(),
  redis_url: z
    .string()
    .refine(
      isRedisUrl,
      'write a redis://, rediss:// or redis+sentinel:// URL; percent-encode "/", "?" or "#" in a password',
    )
    .optional(),
  /** Key prefix of every Redis key; `:` may separate namespaces but cannot end it. @defaultValue iop-edge */
  prefix: z
    .string()
    .regex(
      /^[A-Za-z0-9{][A-Za-z0-9._:{}-]*$/,
      'use letters, digits, ".", "_", "-", ":" or a Redis Cluster hash tag in braces, starting with a letter, digit or "{"',
    )
    .refine((p) => !p.endsWith(':'), 'the prefix cannot end with ":" (the gateway adds it)')
    .default('iop-edge'),
  /**
   * `redis_url` is one seed node of a Redis Cluster: every pool's keys share a hash tag (one slot),
   * unrelated pools spread over the shards. @defaultValue false
   */
  cluster: z.boolean().default(false),
  /** Longest a request waits for a lease. @defaultValue 60000 */
  max_wait_ms: positiveMs.default(60_000),
  /** Per-provider queue bound for providers without their own. @defaultValue 100 */
  max_queued: z.number().int().nonnegative().default(DEFAULT_MAX_QUEUED),
});

export const healthSchema = z.strictObject({
  /** @defaultValue 5000 */
  interval_ms: positiveMs.default(5000),
  /** @defaultValue 2000 */
  timeout_ms: positiveMs.default(2000),
  /** Consecutive failures before a provider is unhealthy. @defaultValue 3 */
  unhealthy_after: z.number().int().positive().default(3),
  /** Consecutive successes before it is healthy again. @defaultValue 2 */
  healthy_after: z.number().int().positive().default(2),
  /**
   * A provider turned unhealthy by failing requests (whatever its probe says) sits out this long,
   * in ms, then takes one trial request: a success brings it back, a failure starts another
   * cooldown. @defaultValue 30000
   */
  cooldown_ms: positiveMs.default(30_000),
});

export const statusSchema = z.strictObject({
  /** @defaultValue 127.0.0.1:9464 */
  listen: listen.default('127.0.0.1:9464'),
  push_url: httpUrl.optional(),
  /** @defaultValue 5000 */
  interval_ms: positiveMs.default(5000),
  /**
   * Keys for `/status`, `/metrics` and the exporter's dashboard (gateway and exporter), sent as
   * `Authorization: Bearer <key>` or as the password of HTTP Basic auth; empty = open. Probes
   * (`/healthz`, `/readyz`) stay open. @defaultValue []
   */
  api_keys: z.array(apiKey).default([]),
});

const httpAdapterFields = {
  id,
  base_url: httpUrl,
  api_key: z.string().optional(),
  /** @defaultValue true */
  enabled: z.boolean().default(true),
};

export const httpAdapterSchema = z.strictObject({
  ...httpAdapterFields,
  type: z.enum(['ollama', 'vllm', 'openai_compat']),
});

export const cliAdapterSchema = z.strictObject({
  id,
  type: z.literal('cli'),
  /** argv array; never run through a shell. */
  command: z.array(z.string().min(1)).min(1, 'give the program and its arguments, e.g. ["my-llm", "--quiet"]'),
  /** Kill the process group after this long. @defaultValue 120000 */
  timeout_ms: positiveMs.default(120_000),
  /** @defaultValue true */
  enabled: z.boolean().default(true),
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
    .default({}),
  /**
   * Most stdout a non-streamed answer may hold, in bytes; more is a 502 and the process group is
   * killed. Streamed answers pass in constant memory whatever their length. @defaultValue 16777216 (16 MiB)
   */
  max_output_bytes: z
    .number()
    .int()
    .positive()
    .default(16 * 1024 * 1024),
  /**
   * How the messages are written on stdin: `text` (`Role: text` blocks, role labels inside a text
   * escaped) or `jsonl` (one `{"role","content"}` JSON object per line). @defaultValue text
   */
  prompt_format: z.enum(['text', 'jsonl']).default('text'),
});

export const adapterSchema = z.discriminatedUnion('type', [httpAdapterSchema, cliAdapterSchema], {
  error: `type must be one of ${ADAPTER_TYPES.join(', ')}`,
});

/** A model a provider serves: a bare public name, or `{name, upstream}` to rename it upstream. */
export const modelSchema = z.union(
  [z.string().min(1), z.strictObject({ name: z.string().min(1), upstream: z.string().min(1) })],
  {
    error: 'write a model name, or {name: <public name>, upstream: <upstream name>}',
  },
);

export const providerSchema = z.strictObject({
  /** Unique across the whole file. */
  id,
  category: z.enum(ADAPTER_TYPES, { error: `category must be one of ${ADAPTER_TYPES.join(', ')}` }),
  /** An adapter id on this node, or a type when exactly one enabled adapter of it exists here. */
  adapter: z.string().min(1),
  models: z.array(modelSchema).min(1, 'list at least one model'),
  /** Required for pool categories. */
  max_concurrency: z.number().int().optional(),
  /** Overrides queue.max_queued for this provider. */
  max_queued: z.number().int().nonnegative().optional(),
  /** @defaultValue true */
  enabled: z.boolean().default(true),
});

export const nodeSchema = z.strictObject({
  id,
  adapters: z.array(adapterSchema).default([]),
  providers: z.array(providerSchema).default([]),
});

export const routeSchema = z.strictObject({
  model: z.string().min(1),
  node: z.string().min(1),
  adapter: z.string().min(1),
  upstream: z.string().min(1).optional(),
});

export const edgeConfigSchema = z.strictObject({
  version: z.literal(1, { error: 'version must be 1' }),
  gateway: gatewaySchema.prefault({}),
  queue: queueSchema.prefault({}),
  health: healthSchema.prefault({}),
  status: statusSchema.prefault({}),
  nodes: z.array(nodeSchema).min(1, 'declare at least one node'),
  routes: z.array(routeSchema).default([]),
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
