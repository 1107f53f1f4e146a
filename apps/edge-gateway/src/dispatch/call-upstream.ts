import { estimateTokenWeight } from '@iop/dispatch';
import type { AdapterConfig } from '@iop/validate';
import type { DispatchContext, UpstreamResponse } from '../adapters/adapter';
import { ApiError, toClientError, upstreamTimeout } from '../errors';
import { sendJson, sendUpstream, type SendResult } from '../http/answer/send-upstream';
import { requestLogger } from '../http/request/request-id';
import { callAdapter } from './call-adapter';
import { clientIdOf, countReported, countUsed } from './charge-attempt';
import type { CompletionRequest } from './completion-request';
import type { DispatchBody } from './dispatcher-deps';
import { rememberResponseId } from './remember-response-id';
import { AttemptTokens } from './attempt-tokens';
import { askStreamUsage, dropUsageChunks } from './stream-usage';
import { watchUsage, type TokenUsage } from './token-usage';

/**
 * `usage` with its completion tokens at most the request's completion allowance when it names one
 * (`max_tokens`/`max_completion_tokens` × `n`, `max_output_tokens`: `estimateTokenWeight`): an engine
 * never generates past it, so a count above it is not what the request used (README "Token budgets:
 * what a client sees"). Without one, the count stands (bounded by `tokenCount`).
 */
function withinAllowance(req: CompletionRequest, usage: TokenUsage): TokenUsage {
  req.tokenWeight ??= estimateTokenWeight(req.endpoint, req.body);
  const allowance = req.tokenWeight.completion;
  return allowance === undefined || usage.output <= allowance ? usage : { ...usage, output: allowance };
}

/** An upstream's usage object as logged: its JSON, at most 300 characters. */
function echoedUsage(usage: unknown): string {
  return (JSON.stringify(usage) ?? '').slice(0, 300);
}

/** A target the dispatcher calls: a pool candidate, or a direct route's adapter. */
export interface CallTarget {
  nodeId: string;
  /** The provider id (or a legacy route's adapter id): the `x-iop-resource` header and the log's `provider`. */
  resourceId: string;
  adapter: AdapterConfig;
  upstreamModel: string;
}

/**
 * One attempt: calls `target` and writes its answer (README "Streaming"). `request_timeout_ms`
 * bounds the time to the upstream's first byte, not a healthy stream (README "Configuration"); the
 * answer is watched for its token usage and, for a pooled Responses request, its response id
 * (affinity); the usage it reports is counted for the request's client (`iop_edge_client_tokens_total`,
 * every route). `onFirstByte` fires when the upstream's first byte is in hand. Every attempt is
 * metered (`AttemptTokens`: the reported usage, and what is relayed for an estimate), and a
 * streamed chat completion asks the upstream for its usage and drops the usage chunk the client did
 * not ask for ({@link askStreamUsage}, {@link dropUsageChunks}). `meter`, a budgeted client's pooled
 * attempt's: its caller charges and counts what it used (`releaseAttempt`); without one, what the
 * attempt used is counted here when it ends ({@link countUsed}).
 * @returns how the answer ended (mid-stream failures, stalled clients); throws only before the
 *   first byte, with the abort's reason (client gone, first-byte timeout, lease lost) when there is
 *   one, else the adapter's error.
 */
export async function callUpstream(
  req: CompletionRequest,
  body: DispatchBody,
  target: CallTarget,
  attempt: AbortController,
  onFirstByte?: () => void,
  meter?: AttemptTokens,
): Promise<SendResult> {
  const { deps, endpoint, res, config, outcome } = req;
  outcome.nodeId = target.nodeId;
  outcome.resourceId = target.resourceId;
  outcome.adapterType = target.adapter.type;
  outcome.upstreamStartedAt = performance.now();
  res.setHeader('x-iop-node', target.nodeId);
  res.setHeader('x-iop-resource', target.resourceId);
  const adapter = deps.adapters.get(target.nodeId, target.adapter);
  const timeoutMs = config.gateway.request_timeout_ms;
  const firstByteTimer = setTimeout(
    () => attempt.abort(upstreamTimeout({ wait: 'first_byte', ms: timeoutMs })),
    timeoutMs,
  );
  const { signal } = attempt;
  const ctx: DispatchContext = {
    upstreamModel: target.upstreamModel,
    signal,
    maxResponseBytes: config.gateway.max_response_bytes,
    // README "Connections to an upstream": not a failure of anyone's; logged so an operator can see how often.
    onResent: (detail) =>
      requestLogger(res, deps.logger).info(
        { provider: target.resourceId, node: target.nodeId, detail },
        'upstream closed a reused connection as the request arrived, unread; sent again on a fresh connection',
      ),
  };
  // An abort's reason (client gone, first-byte timeout) explains a failure better than the adapter's error.
  const explain = (err: unknown) => (signal.aborted && signal.reason instanceof ApiError ? signal.reason : err);
  // Every attempt is metered, so every client's tokens are counted (`countUsed`); a caller that passes its own meter counts them.
  const tokens = meter ?? new AttemptTokens(endpoint);
  const ask = askStreamUsage(endpoint, body, target.adapter.type);
  try {
    let upstream: UpstreamResponse;
    try {
      upstream = await callAdapter(adapter, target.adapter, endpoint, ask.body, ctx);
    } catch (err) {
      throw explain(err);
    }
    upstream = watchUsage(
      upstream,
      endpoint,
      (reported) => {
        const usage = withinAllowance(req, reported);
        outcome.usage = usage;
        tokens.report(usage);
        countReported(deps.clientTokens, clientIdOf(req), usage);
      },
      // Not a token count: nothing is counted from it; a budgeted client is charged the estimate.
      (usage) =>
        requestLogger(res, deps.logger).warn(
          { provider: target.resourceId, node: target.nodeId, usage: echoedUsage(usage) },
          'upstream reported a usage whose counts are not token counts; estimated instead',
        ),
    );
    if (ask.dropUsage && upstream.kind === 'sse') upstream = dropUsageChunks(upstream);
    upstream = tokens.watch(upstream);
    const affinity = deps.affinity;
    if (endpoint === 'responses' && affinity && outcome.routeKind === 'pool') {
      upstream = rememberResponseId(upstream, (id) => void affinity.set(id, target.resourceId));
    }
    if (upstream.kind === 'json') {
      // Written in one go: no stream options, closures or promise for a non-streamed answer.
      clearTimeout(firstByteTimer);
      outcome.firstByteAt = performance.now();
      onFirstByte?.();
      try {
        return sendJson(res, upstream);
      } catch (err) {
        throw explain(err);
      }
    }
    return await sendUpstream(res, upstream, {
      endpoint,
      idleTimeoutMs: config.gateway.stream_idle_timeout_ms,
      onFirstByte: () => {
        clearTimeout(firstByteTimer);
        outcome.firstByteAt = performance.now();
        onFirstByte?.();
      },
      abortUpstream: (reason) => attempt.abort(reason),
      clientError: (err) => toClientError(explain(err), req.requestId),
    }).catch((err: unknown) => {
      throw explain(err);
    });
  } finally {
    clearTimeout(firstByteTimer);
    if (!meter) countUsed(req, tokens, signal.aborted);
  }
}
