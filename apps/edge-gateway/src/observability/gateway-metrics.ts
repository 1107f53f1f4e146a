import { listModels } from '@iop/dispatch';
import { ResourceGauges, type StatusSnapshot } from '@iop/status';
import type { EdgeConfig } from '@iop/validate';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { DispatchOutcome } from '../dispatch/outcome';
import { ClientTokenCounter } from './client-token-metrics';

/** Label for a model the config does not serve (or a request without a model): keeps cardinality bounded by the config. */
export const OTHER_MODEL = 'other';

/** Client label of a request answered before its client was known (a 401, a preflight). */
export const NO_CLIENT = 'none';

/** Route kind label: `pool` (admission controlled), `direct` (CLI / legacy), `none` (rejected before a route was resolved). */
export type RouteKindLabel = 'pool' | 'direct' | 'none';

/** Latency buckets, in seconds: 5 ms … 2 min (LLM answers are slow; streams can be long). */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Queue-wait buckets, in seconds: 1 ms … 60 s (`queue.max_wait_ms` default). */
const QUEUE_WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** OpenTelemetry GenAI semantic conventions: advised buckets of `gen_ai.client.token.usage` and `gen_ai.client.operation.duration`. */
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];
const OPERATION_DURATION_BUCKETS = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/** `gen_ai.operation.name` of both completion endpoints (chat-style generation). */
export const GEN_AI_OPERATION = 'chat';

/** The label objects {@link GatewayMetrics.finishCompletion} passes to prom-client for one kind of request. */
interface LabelSets {
  modelRoute: { model: string; route: RouteKindLabel };
  modelClient: { model: string; client: string };
  withStatus(status: number): { model: string; route: RouteKindLabel; status: string; client: string };
  byProvider: { provider: string; model: string };
  genAi: {
    gen_ai_operation_name: string;
    gen_ai_provider_name: string;
    gen_ai_request_model: string;
    provider: string;
  };
  tokens: Record<'input' | 'output', { provider: string; model: string; type: 'input' | 'output' }>;
  tokenUsage: Record<
    'input' | 'output',
    {
      gen_ai_operation_name: string;
      gen_ai_provider_name: string;
      gen_ai_request_model: string;
      provider: string;
      gen_ai_token_type: 'input' | 'output';
    }
  >;
}

/**
 * The gateway's own Prometheus registry (docs/architecture.md, "Status model": request counters and
 * latency, queue-wait and time-to-first-byte histograms), one per app so tests never share series:
 * - `iop_edge_requests_total{model,route,status,client}`: finished completion requests;
 * - `iop_edge_request_duration_seconds{model,route}`: arrival → response finished (or client gone);
 * - `iop_edge_queue_wait_seconds{model,client}`: acquireLease → grant, pooled requests only;
 * - `iop_edge_time_to_first_byte_seconds{model,route}`: arrival → the upstream's first byte in hand
 *   (includes the queue wait; for a non-streamed answer that is the whole upstream call);
 * - `iop_edge_config_reload_failures_total`: rejected config reloads (docs/architecture.md, "Settings");
 * - `iop_edge_requests_in_flight`: completion requests being served by this replica now;
 * - per provider (`provider` = the provider id, or the adapter id of a legacy route), once a
 *   request reached one: `iop_edge_provider_queue_wait_seconds{provider,model}`,
 *   `iop_edge_provider_time_to_first_byte_seconds{provider,model}`, and the tokens the upstream
 *   reported in its `usage`, `iop_edge_tokens_total{provider,model,type}` (`type` = `input` or
 *   `output`, the values of `gen_ai.token.type`);
 * - per client, `iop_edge_client_tokens_total{client,kind}` ({@link ClientTokenCounter});
 * - the OpenTelemetry GenAI client metrics under their Prometheus names:
 *   `gen_ai_client_token_usage` (tokens per request) and `gen_ai_client_operation_duration_seconds`
 *   (the upstream call, start to last byte), labelled `gen_ai_operation_name`,
 *   `gen_ai_provider_name` (the adapter type), `gen_ai_request_model` (the model label), `provider`
 *   (and `gen_ai_token_type`, or `error_type` = the HTTP status of a failed call);
 * - the resource gauges of `/status` (`iop_edge_resource_*`), refreshed per scrape.
 * `model` is the request's model when the config serves it, else `other`; `client` is the client id
 * (docs/architecture.md, "Clients, priority and fair share": config ids, `api_keys[<n>]` or
 * `anonymous`; `none` before the key was checked). Labels never carry prompts, keys or any other
 * client text.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: 'iop_edge_requests_total',
    help: 'Completion requests finished, by model, route kind (pool/direct/none) and HTTP status (499 = client closed first).',
    labelNames: ['model', 'route', 'status', 'client'] as const,
    registers: [this.registry],
  });
  private readonly duration = new Histogram({
    name: 'iop_edge_request_duration_seconds',
    help: 'Completion request latency, arrival to response finished, in seconds.',
    labelNames: ['model', 'route'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly queueWait = new Histogram({
    name: 'iop_edge_queue_wait_seconds',
    help: 'Time a pooled request waited for a lease, in seconds.',
    labelNames: ['model', 'client'] as const,
    buckets: QUEUE_WAIT_BUCKETS,
    registers: [this.registry],
  });
  private readonly firstByte = new Histogram({
    name: 'iop_edge_time_to_first_byte_seconds',
    help: "Completion request arrival to the upstream's first byte in hand (queue wait included), in seconds.",
    labelNames: ['model', 'route'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly reloadFailures = new Counter({
    name: 'iop_edge_config_reload_failures_total',
    help: 'Config reloads rejected (invalid file or failed apply); the running config stayed.',
    registers: [this.registry],
  });
  private readonly inFlight = new Gauge({
    name: 'iop_edge_requests_in_flight',
    help: 'Completion requests being served by this replica now.',
    registers: [this.registry],
  });
  private readonly providerQueueWait = new Histogram({
    name: 'iop_edge_provider_queue_wait_seconds',
    help: 'Time a pooled request waited for a lease, by the provider that granted it, in seconds.',
    labelNames: ['provider', 'model'] as const,
    buckets: QUEUE_WAIT_BUCKETS,
    registers: [this.registry],
  });
  private readonly providerFirstByte = new Histogram({
    name: 'iop_edge_provider_time_to_first_byte_seconds',
    help: 'Completion request arrival to the first byte of the provider that answered (queue wait included), in seconds.',
    labelNames: ['provider', 'model'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly tokens = new Counter({
    name: 'iop_edge_tokens_total',
    help: 'Tokens the upstream reported in its usage, by provider, model and type (input, output).',
    labelNames: ['provider', 'model', 'type'] as const,
    registers: [this.registry],
  });
  private readonly tokenUsage = new Histogram({
    name: 'gen_ai_client_token_usage',
    help: 'OpenTelemetry gen_ai.client.token.usage: tokens per request as the upstream reported them.',
    labelNames: [
      'gen_ai_operation_name',
      'gen_ai_provider_name',
      'gen_ai_request_model',
      'gen_ai_token_type',
      'provider',
    ] as const,
    buckets: TOKEN_BUCKETS,
    registers: [this.registry],
  });
  private readonly operationDuration = new Histogram({
    name: 'gen_ai_client_operation_duration_seconds',
    help: 'OpenTelemetry gen_ai.client.operation.duration: the call to the upstream that answered, start to last byte, in seconds.',
    labelNames: [
      'gen_ai_operation_name',
      'gen_ai_provider_name',
      'gen_ai_request_model',
      'provider',
      'error_type',
    ] as const,
    buckets: OPERATION_DURATION_BUCKETS,
    registers: [this.registry],
  });
  private readonly resources = new ResourceGauges(this.registry);
  /** `iop_edge_client_tokens_total{client,kind}`: counted by the dispatcher as each attempt ends (`DispatcherDeps.clientTokens`). */
  readonly clientTokens = new ClientTokenCounter(this.registry);
  private knownModels: { config: EdgeConfig; names: ReadonlySet<string> } | undefined;
  private readonly labelCache = new Map<string, LabelSets>();

  /** Marks a completion request as started (`iop_edge_requests_in_flight`); pair with {@link finishCompletion}. */
  startCompletion(): void {
    this.inFlight.inc();
  }

  /**
   * Counts and times one finished completion request (when its response closed).
   * @param model the request's model (`other` unless the config serves it)
   * @param client the request's client id (`none` before one was known, e.g. a 401)
   * @param status the HTTP status, 499 when the client left first
   * @param startedAt `performance.now()` at arrival
   */
  finishCompletion(
    config: EdgeConfig,
    model: unknown,
    client: string | undefined,
    status: number,
    outcome: DispatchOutcome | undefined,
    startedAt: number,
  ): void {
    this.inFlight.dec();
    const label = this.modelLabel(config, model);
    // The dispatcher sets `pool` once a pool resolved; `direct` only counts once a target was picked, so 400/401/404 are `none`.
    const route: RouteKindLabel =
      outcome?.routeKind === 'pool' ? 'pool' : outcome?.resourceId !== undefined ? 'direct' : 'none';
    const provider = outcome?.resourceId;
    const labels = this.labelSets(label, client ?? NO_CLIENT, route, provider, outcome?.adapterType ?? 'unknown');
    this.requests.inc(labels.withStatus(status));
    this.duration.observe(labels.modelRoute, (performance.now() - startedAt) / 1000);
    if (outcome?.firstByteAt !== undefined)
      this.firstByte.observe(labels.modelRoute, (outcome.firstByteAt - startedAt) / 1000);
    if (outcome?.queueWaitMs !== undefined) this.queueWait.observe(labels.modelClient, outcome.queueWaitMs / 1000);
    if (outcome === undefined || provider === undefined) return;
    if (outcome.queueWaitMs !== undefined)
      this.providerQueueWait.observe(labels.byProvider, outcome.queueWaitMs / 1000);
    if (outcome.firstByteAt !== undefined)
      this.providerFirstByte.observe(labels.byProvider, (outcome.firstByteAt - startedAt) / 1000);
    if (outcome.upstreamStartedAt !== undefined) {
      this.operationDuration.observe(
        status >= 400 ? { ...labels.genAi, error_type: String(status) } : labels.genAi,
        (performance.now() - outcome.upstreamStartedAt) / 1000,
      );
    }
    if (outcome.usage) {
      for (const type of ['input', 'output'] as const) {
        this.tokens.inc(labels.tokens[type], outcome.usage[type]);
        this.tokenUsage.observe(labels.tokenUsage[type], outcome.usage[type]);
      }
    }
  }

  /**
   * The label objects of one (model, client, route, provider, adapter type), built once and reused (never
   * mutated: prom-client may keep the first one it saw), so a finished request allocates none.
   * Bounded by the config's names; emptied when the config changes.
   */
  private labelSets(
    model: string,
    client: string,
    route: RouteKindLabel,
    provider: string | undefined,
    adapterType: string,
  ): LabelSets {
    const key = `${model}\n${client}\n${route}\n${provider ?? ''}\n${adapterType}`;
    let sets = this.labelCache.get(key);
    if (sets) return sets;
    const byStatus = new Map<number, { model: string; route: RouteKindLabel; status: string; client: string }>();
    const genAi = {
      gen_ai_operation_name: GEN_AI_OPERATION,
      gen_ai_provider_name: adapterType,
      gen_ai_request_model: model,
      provider: provider ?? '',
    };
    const byProvider = { provider: provider ?? '', model };
    sets = {
      modelRoute: { model, route },
      modelClient: { model, client },
      withStatus: (status) => {
        let l = byStatus.get(status);
        if (!l) byStatus.set(status, (l = { model, route, status: String(status), client }));
        return l;
      },
      byProvider,
      genAi,
      tokens: { input: { ...byProvider, type: 'input' }, output: { ...byProvider, type: 'output' } },
      tokenUsage: {
        input: { ...genAi, gen_ai_token_type: 'input' },
        output: { ...genAi, gen_ai_token_type: 'output' },
      },
    };
    this.labelCache.set(key, sets);
    return sets;
  }

  /** Counts one rejected config reload (`iop_edge_config_reload_failures_total`). */
  countReloadFailure(): void {
    this.reloadFailures.inc();
  }

  /** Prometheus text of every series, with the resource gauges set from `snapshot` first. */
  async render(snapshot: StatusSnapshot): Promise<string> {
    this.resources.update(snapshot);
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The `model` label of `model`: itself when the config serves it, else `other`. */
  modelLabel(config: EdgeConfig, model: unknown): string {
    if (this.knownModels?.config !== config) {
      this.knownModels = { config, names: new Set(listModels(config)) };
      this.labelCache.clear();
    }
    return typeof model === 'string' && this.knownModels.names.has(model) ? model : OTHER_MODEL;
  }
}
