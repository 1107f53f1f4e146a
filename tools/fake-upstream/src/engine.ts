import { createHash } from 'node:crypto';
import { isObject } from './knobs';
import { contentText } from './prompt';

/**
 * Parameters of the modelled inference engine (tools/fake-upstream/README, "Engine model"). One fake upstream is one engine:
 * its own KV cache, its own batch.
 */
export interface EngineOptions {
  /** KV cache size, in blocks (LRU). ≥ 1. @defaultValue 2048 */
  cacheBlocks: number;
  /** Tokens per KV block (vLLM's and Mooncake's block of 512 tokens). ≥ 1. @defaultValue 512 */
  blockTokens: number;
  /** Prefill time per uncached prompt token on an idle engine, in ms. @defaultValue 0.05 */
  prefillMsPerToken: number;
  /** Decode time per output token after the first, in ms. @defaultValue 10 */
  decodeMsPerToken: number;
  /** Fixed time before the first token of every request (scheduling, sampling), in ms. @defaultValue 5 */
  overheadMs: number;
  /** Requests running at once; the rest wait, first come first served. ≥ 1. @defaultValue 16 */
  maxBatch: number;
}

/** The defaults of {@link EngineOptions}. */
export const ENGINE_DEFAULTS: Readonly<EngineOptions> = {
  cacheBlocks: 2048,
  blockTokens: 512,
  prefillMsPerToken: 0.05,
  decodeMsPerToken: 10,
  overheadMs: 5,
  maxBatch: 16,
};

/** UTF-8 bytes per modelled token: the cheap deterministic tokenizer (tools/fake-upstream/README, "Engine model"). */
export const BYTES_PER_TOKEN = 4;

/** The engine's counters, as `stats().engine` and `GET /__stats` report them (since start or the last reset). */
export interface EngineStats {
  /** Prompt tokens looked up in the prefix cache (vLLM's `prefix_cache_queries`), tokens. */
  queries: number;
  /** Prompt tokens found cached (vLLM's `prefix_cache_hits`), tokens. */
  hits: number;
  /** Blocks holding a cached prefix, 0..`cacheBlocks`. */
  blocksUsed: number;
  /** The cache's size, in blocks. */
  cacheBlocks: number;
  /** Blocks dropped to make room (least recently used first). */
  evictions: number;
  /** Requests past admission and not yet finished (prefilling or decoding), 0..`maxBatch`. */
  running: number;
  /** Requests waiting for a place in the batch. */
  waiting: number;
}

/** What the engine worked out for one request at its admission (figures of the model, not measured). */
export interface PrefillPlan {
  /** Modelled prompt tokens: ⌈UTF-8 bytes of the rendered prompt / 4⌉. */
  promptTokens: number;
  /** Tokens of the longest cached prefix of the prompt's blocks (a multiple of `blockTokens`). */
  cachedTokens: number;
  /** `1 + (running − 1) / maxBatch`, running counting this request, at its admission. */
  loadFactor: number;
  /** Time to first token: `overheadMs + (promptTokens − cachedTokens) × prefillMsPerToken × loadFactor`, ms. */
  ttftMs: number;
  /** The prompt's chained block hashes (whole blocks only), to insert once the prefill is done. */
  blockHashes: string[];
}

/**
 * The prompt text the engine tokenizes: for each chat message (or Responses input item) its `role`, a newline, its
 * content's text and a newline; a Responses request's `instructions` first (as `system`), a string `input` as one
 * `user` message. Two requests with the same leading messages share the same leading text.
 */
export function renderPrompt(api: 'chat' | 'responses', body: Record<string, unknown>): string {
  let text = '';
  if (api === 'responses') {
    if (typeof body.instructions === 'string') text += `system\n${body.instructions}\n`;
    if (typeof body.input === 'string') return `${text}user\n${body.input}\n`;
  }
  const items = api === 'chat' ? body.messages : body.input;
  if (!Array.isArray(items)) return text;
  for (const item of items) {
    if (!isObject(item)) continue;
    text += `${typeof item.role === 'string' ? item.role : ''}\n${contentText(item.content)}\n`;
  }
  return text;
}

/**
 * The chained hashes of the whole blocks of `text` (a trailing partial block is not cached, as in vLLM's
 * prefix caching): block `i` is bytes `[i·b, (i+1)·b)` of its UTF-8, `b = blockTokens × 4`, and its hash is
 * SHA-256 (first 16 hex digits) of block `i−1`'s hash and block `i`'s bytes, so it covers blocks `0..i`:
 * two prompts share their first `k` hashes exactly when their first `k` blocks are byte for byte the same.
 */
export function promptBlocks(text: string, blockTokens: number): { promptTokens: number; blockHashes: string[] } {
  const bytes = Buffer.from(text, 'utf8');
  const blockBytes = blockTokens * BYTES_PER_TOKEN;
  const blockHashes: string[] = [];
  let previous = '';
  for (let start = 0; start + blockBytes <= bytes.length; start += blockBytes) {
    previous = createHash('sha256')
      .update(previous)
      .update(bytes.subarray(start, start + blockBytes))
      .digest('hex')
      .slice(0, 16);
    blockHashes.push(previous);
  }
  return { promptTokens: Math.ceil(bytes.length / BYTES_PER_TOKEN), blockHashes };
}

/**
 * A KV cache of `capacity` blocks keyed by chained block hash, least recently used evicted first. A prompt's blocks
 * are touched last to first, so its first block is the most recent and a full cache drops a prompt's tail before its
 * head (vLLM docs, "Automatic Prefix Caching": free blocks are evicted from the end of the longest prefix first).
 */
export class KvCache {
  /** Insertion order = recency: the first key is the least recently used. */
  private readonly blocks = new Set<string>();
  evictions = 0;

  constructor(readonly capacity: number) {}

  get used(): number {
    return this.blocks.size;
  }

  /** How many of `hashes`, from the first, are cached (the longest cached prefix), at most `limit`. */
  cachedPrefix(hashes: readonly string[], limit = hashes.length): number {
    let k = 0;
    while (k < Math.min(limit, hashes.length) && this.blocks.has(hashes[k])) k++;
    return k;
  }

  /** Inserts (or touches) `hashes`, evicting the least recently used blocks beyond `capacity`. */
  insert(hashes: readonly string[]): void {
    for (let i = hashes.length - 1; i >= 0; i--) {
      this.blocks.delete(hashes[i]);
      this.blocks.add(hashes[i]);
    }
    for (const oldest of this.blocks) {
      if (this.blocks.size <= this.capacity) break;
      this.blocks.delete(oldest);
      this.evictions++;
    }
  }

  /** Empties the cache and zeroes `evictions`. */
  clear(): void {
    this.blocks.clear();
    this.evictions = 0;
  }
}

/** A place in the batch: `release` it exactly once (idempotent) when the request ends. */
export interface BatchSlot {
  release(): void;
}

/**
 * The model of one inference engine (tools/fake-upstream/README, "Engine model"): a batch of `maxBatch` running requests with a
 * first-come-first-served waiting line, a {@link KvCache}, and the time to first token of a request computed
 * from its uncached prompt tokens and the load at its admission.
 */
export class EngineModel {
  readonly options: EngineOptions;
  readonly cache: KvCache;
  private running = 0;
  private readonly line: Array<(slot: BatchSlot) => void> = [];
  private queries = 0;
  private hits = 0;

  constructor(options: Partial<EngineOptions> = {}) {
    this.options = { ...ENGINE_DEFAULTS, ...options };
    checkEngineOptions(this.options);
    this.cache = new KvCache(this.options.cacheBlocks);
  }

  /**
   * A place in the batch, at once while fewer than `maxBatch` run, else once one frees (in order of arrival).
   * `gone` is called with a callback to run if the request's client leaves first: it leaves the line.
   */
  admit(gone: (leave: () => void) => void): Promise<BatchSlot> {
    if (this.running < this.options.maxBatch) {
      this.running++;
      return Promise.resolve(this.slot());
    }
    return new Promise<BatchSlot>((resolve) => {
      this.line.push(resolve);
      gone(() => {
        const at = this.line.indexOf(resolve);
        if (at !== -1) this.line.splice(at, 1);
      });
    });
  }

  /**
   * Plans the prefill of `promptText` for a request just admitted (counted in `running`): looks up its cached
   * prefix and counts the query and hit tokens (vLLM's metrics docs, `vllm:prefix_cache_queries` and
   * `vllm:prefix_cache_hits`). The last prompt token is always computed, so a prompt that is all whole cached
   * blocks hits one block less (as vLLM's prefix caching). Insert its blocks with {@link commit} after the prefill.
   */
  plan(promptText: string): PrefillPlan {
    const { blockTokens, overheadMs, prefillMsPerToken, maxBatch } = this.options;
    const { promptTokens, blockHashes } = promptBlocks(promptText, blockTokens);
    const hitBlocks = this.cache.cachedPrefix(blockHashes, Math.floor(Math.max(0, promptTokens - 1) / blockTokens));
    const cachedTokens = hitBlocks * blockTokens;
    this.queries += promptTokens;
    this.hits += cachedTokens;
    const loadFactor = 1 + (Math.max(1, this.running) - 1) / maxBatch;
    const ttftMs = overheadMs + (promptTokens - cachedTokens) * prefillMsPerToken * loadFactor;
    return { promptTokens, cachedTokens, loadFactor, ttftMs, blockHashes };
  }

  /** The prefill of `plan` is done: its blocks enter the cache (touched, LRU eviction). */
  commit(plan: PrefillPlan): void {
    this.cache.insert(plan.blockHashes);
  }

  /** Decode time of `tokens` output tokens, ms: `tokens × decodeMsPerToken` (not scaled by load). */
  decodeMs(tokens: number): number {
    return Math.max(0, tokens) * this.options.decodeMsPerToken;
  }

  snapshot(): EngineStats {
    return {
      queries: this.queries,
      hits: this.hits,
      blocksUsed: this.cache.used,
      cacheBlocks: this.cache.capacity,
      evictions: this.cache.evictions,
      running: this.running,
      waiting: this.line.length,
    };
  }

  /** Zeroes the counters and empties the cache (a cold engine); running and waiting requests stay. */
  reset(): void {
    this.queries = 0;
    this.hits = 0;
    this.cache.clear();
  }

  /**
   * vLLM-style Prometheus text (exposition format 0.0.4) for `GET /metrics`, every sample labelled
   * `model_name` (vLLM's metrics docs, "Production Metrics"): the gauges `vllm:num_requests_running`,
   * `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc` (0..1, cached blocks / `cacheBlocks`) and the
   * counters `vllm:prefix_cache_queries_total`, `vllm:prefix_cache_hits_total` (tokens).
   */
  metricsText(modelName: string): string {
    const s = this.snapshot();
    const label = `{model_name=${JSON.stringify(modelName)}}`;
    const metric = (name: string, type: 'gauge' | 'counter', help: string, value: number) =>
      `# HELP ${name} ${help}\n# TYPE ${name} ${type}\n${name}${label} ${formatNumber(value)}\n`;
    return (
      metric('vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', s.running) +
      metric('vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', s.waiting) +
      metric(
        'vllm:kv_cache_usage_perc',
        'gauge',
        'KV-cache usage. 1 means 100 percent usage.',
        s.blocksUsed / s.cacheBlocks,
      ) +
      metric(
        'vllm:prefix_cache_queries_total',
        'counter',
        'Prefix cache queries, in terms of number of queried tokens.',
        s.queries,
      ) +
      metric(
        'vllm:prefix_cache_hits_total',
        'counter',
        'Prefix cache hits, in terms of number of cached tokens.',
        s.hits,
      )
    );
  }

  private slot(): BatchSlot {
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        const next = this.line.shift();
        if (next) next(this.slot());
        else this.running--;
      },
    };
  }
}

/** A sample value as Prometheus text writes it (a float with a decimal point, as Python's client does). */
function formatNumber(n: number): string {
  return Number.isInteger(n) ? `${n}.0` : String(n);
}

/** @throws Error naming the option, for a count that is not a whole number ≥ 1 or a time that is not a number ≥ 0. */
export function checkEngineOptions(o: EngineOptions): void {
  for (const key of ['cacheBlocks', 'blockTokens', 'maxBatch'] as const)
    if (!Number.isInteger(o[key]) || o[key] < 1)
      throw new Error(`engine.${key} must be a whole number ≥ 1, got ${o[key]}`);
  for (const key of ['prefillMsPerToken', 'decodeMsPerToken', 'overheadMs'] as const)
    if (!Number.isFinite(o[key]) || o[key] < 0) throw new Error(`engine.${key} must be a number ≥ 0, got ${o[key]}`);
}

/** The CLI flags of the engine model and the option each sets (tools/fake-upstream/README, "Engine model"). */
export const ENGINE_FLAGS = {
  'engine-cache-blocks': 'cacheBlocks',
  'engine-block-tokens': 'blockTokens',
  'engine-prefill-ms-per-token': 'prefillMsPerToken',
  'engine-decode-ms-per-token': 'decodeMsPerToken',
  'engine-overhead-ms': 'overheadMs',
  'engine-max-batch': 'maxBatch',
} as const satisfies Record<string, keyof EngineOptions>;

/**
 * The engine options of the CLI: `undefined` (engine off) unless `on` (`--engine`) or some `--engine-*` flag is
 * given; each given flag a number, the rest defaults.
 * @throws Error naming the flag, for a value that is not a number or out of range.
 */
export function parseEngineFlags(
  on: boolean,
  flags: Partial<Record<keyof typeof ENGINE_FLAGS, string>>,
): Partial<EngineOptions> | undefined {
  const options: Partial<EngineOptions> = {};
  let any = on;
  for (const [flag, key] of Object.entries(ENGINE_FLAGS) as Array<[keyof typeof ENGINE_FLAGS, keyof EngineOptions]>) {
    const value = flags[flag];
    if (value === undefined) continue;
    any = true;
    const n = value.trim() === '' ? NaN : Number(value);
    options[key] = n;
    try {
      checkEngineOptions({ ...ENGINE_DEFAULTS, [key]: n });
    } catch (err) {
      throw new Error(`--${flag} ${value}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return any ? options : undefined;
}
