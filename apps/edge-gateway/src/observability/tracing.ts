import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Tracer } from '@opentelemetry/api';
import { redactUrl } from '@iop/validate';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { DispatchOutcome } from '../dispatch/outcome';
import { GEN_AI_OPERATION } from './gateway-metrics';

/** Set by {@link startTracing}; undefined = tracing off (no span is made). */
let tracer: Tracer | undefined;
/** The process's one start of tracing ({@link ensureTracing}). */
let started: Promise<Tracing | undefined> | undefined;
/** True once {@link started} settled (tracing on or off for good). */
let settled = false;
/** Servers whose close flushes the spans still buffered. */
const hooked = new WeakSet<Server>();

/** A running OTLP trace export. */
export interface Tracing {
  /** Flushes the spans still buffered and stops exporting. */
  shutdown(): Promise<void>;
  /** Sends the spans still buffered now. */
  flush(): Promise<void>;
}

/**
 * Starts exporting traces over OTLP/HTTP (JSON) when the standard OpenTelemetry environment asks
 * for it: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or `OTEL_EXPORTER_OTLP_ENDPOINT`
 * (`/v1/traces` is appended), unless `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
 * Off otherwise: the SDK is not even loaded. `OTEL_SERVICE_NAME` names the service (default
 * `iop-edge-gateway`); headers, timeouts and batching follow the usual `OTEL_*` variables.
 */
export async function startTracing(
  env: Record<string, string | undefined>,
  logger: Logger,
): Promise<Tracing | undefined> {
  const endpoint = env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] || env['OTEL_EXPORTER_OTLP_ENDPOINT'];
  if (!endpoint || env['OTEL_SDK_DISABLED'] === 'true' || env['OTEL_TRACES_EXPORTER'] === 'none') return undefined;
  const [{ BasicTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] =
    await Promise.all([
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
    ]);
  // Batches leave every 500 ms unless OTEL_BSP_SCHEDULE_DELAY says otherwise: little is lost when the process exits.
  const scheduledDelayMillis = Number(env['OTEL_BSP_SCHEDULE_DELAY'] || 500);
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': env['OTEL_SERVICE_NAME'] || 'iop-edge-gateway' }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter(), { scheduledDelayMillis })],
  });
  trace.setGlobalTracerProvider(provider);
  tracer = trace.getTracer('iop-edge-gateway');
  logger.info({ endpoint: redactUrl(endpoint) }, 'tracing: exporting spans over OTLP/HTTP');
  return {
    shutdown: async () => {
      tracer = undefined;
      await provider.shutdown();
    },
    flush: () => provider.forceFlush(),
  };
}

/**
 * Starts tracing once per process, from the environment ({@link startTracing}); later calls do
 * nothing. Spans of requests that finish before the exporter is loaded are not recorded.
 */
export function ensureTracing(env: Record<string, string | undefined>, logger: Logger): void {
  started ??= startTracing(env, logger)
    .catch((err: Error) => {
      logger.warn({ err: err.message }, 'tracing: cannot start; no spans are exported');
      return undefined;
    })
    .finally(() => (settled = true));
}

/**
 * True when a finished request's spans are wanted: tracing is on, or its exporter is still loading
 * ({@link recordRequestSpans} records them once it is). False once tracing is off for good, so the
 * request path builds nothing for spans nobody exports.
 */
export function tracingWanted(): boolean {
  return tracer !== undefined || (started !== undefined && !settled);
}

/**
 * Flushes the buffered spans when `server` closes: on SIGTERM the gateway closes its server once
 * the last request finished (README "Running a fleet"), so the spans of the drain are sent before
 * the process exits. Once per server; nothing while tracing is off.
 */
export function flushOnClose(server: Server | undefined): void {
  if (!tracer || !server || hooked.has(server)) return;
  hooked.add(server);
  server.once('close', () => void started?.then((t) => t?.flush()).catch(() => undefined));
}

/** What one finished completion request looked like, for its spans. */
export interface FinishedRequest {
  requestId: string;
  method: string;
  route: string;
  status: number;
  /** The model label (the config's name, or `other`). */
  model: string;
  outcome: DispatchOutcome | undefined;
  /** `performance.now()` at arrival and when the response closed. */
  startedAt: number;
  endedAt: number;
}

/** performance.now() → epoch milliseconds, what OpenTelemetry takes as a time. */
const epochMs = (t: number) => performance.timeOrigin + t;

/**
 * Records one request as a trace, after the fact (its timings are in `outcome`): a SERVER span
 * `POST /v1/...` from arrival to close, with the request id, model, route and provider as
 * attributes, and as its children a `queue wait` span (acquire to grant, pooled requests) and a
 * CLIENT span `chat <model>` for the call to the upstream that answered, with the GenAI
 * semantic-convention attributes and the token usage. Does nothing while tracing is off; a
 * request that finished while the exporter was still loading is recorded once it is loaded.
 */
export function recordRequestSpans(r: FinishedRequest): void {
  if (!tracer) {
    if (started && !settled) void started.then(() => tracer && recordRequestSpans(r));
    return;
  }
  const o = r.outcome;
  const common: Attributes = {
    'iop.request_id': r.requestId,
    'gen_ai.operation.name': GEN_AI_OPERATION,
    'gen_ai.request.model': r.model,
    ...(o?.routeKind && o.resourceId !== undefined ? { 'iop.route': o.routeKind } : {}),
    ...(o?.nodeId ? { 'iop.node': o.nodeId } : {}),
    ...(o?.resourceId ? { 'iop.provider': o.resourceId } : {}),
  };
  const root = tracer.startSpan(`${r.method} ${r.route}`, {
    kind: SpanKind.SERVER,
    startTime: epochMs(r.startedAt),
    attributes: {
      ...common,
      'http.request.method': r.method,
      'http.route': r.route,
      'http.response.status_code': r.status,
      ...(o?.failedOver?.length ? { 'iop.failed_over': o.failedOver } : {}),
    },
  });
  if (r.status >= 500) root.setStatus({ code: SpanStatusCode.ERROR });
  const parent = trace.setSpan(context.active(), root);
  if (o?.queuedAt !== undefined && o.queueWaitMs !== undefined) {
    const wait = tracer.startSpan(
      'queue wait',
      {
        kind: SpanKind.INTERNAL,
        startTime: epochMs(o.queuedAt),
        attributes: { ...common, 'iop.queue_wait_ms': o.queueWaitMs },
      },
      parent,
    );
    wait.end(epochMs(o.queuedAt + o.queueWaitMs));
  }
  if (o?.upstreamStartedAt !== undefined) {
    const call = tracer.startSpan(
      `${GEN_AI_OPERATION} ${r.model}`,
      {
        kind: SpanKind.CLIENT,
        startTime: epochMs(o.upstreamStartedAt),
        attributes: {
          ...common,
          'gen_ai.provider.name': o.adapterType ?? 'unknown',
          ...(o.firstByteAt !== undefined
            ? { 'iop.time_to_first_byte_ms': Math.round(o.firstByteAt - o.upstreamStartedAt) }
            : {}),
          ...(o.usage
            ? { 'gen_ai.usage.input_tokens': o.usage.input, 'gen_ai.usage.output_tokens': o.usage.output }
            : {}),
          ...(r.status >= 400 ? { 'error.type': String(r.status) } : {}),
        },
      },
      parent,
    );
    if (r.status >= 500) call.setStatus({ code: SpanStatusCode.ERROR });
    call.end(epochMs(r.endedAt));
  }
  root.end(epochMs(r.endedAt));
}
