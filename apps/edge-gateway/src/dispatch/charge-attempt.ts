import { estimateTokenWeight, type Lease, type QueueClient, type UsedTokens } from '@iop/dispatch';
import { ANONYMOUS_CLIENT } from '@iop/validate';
import type { AttemptTokens } from './attempt-tokens';
import type { CompletionRequest } from './completion-request';
import type { ClientTokenSink } from './dispatcher-deps';
import type { TokenUsage } from './token-usage';

/**
 * Ends one pooled attempt (README "Token budgets: what a client sees"): releases its lease, charging
 * a budgeted client's budget with what the attempt used (`meter`, its `AttemptTokens.used`: the
 * upstream's usage, 0 for a call the upstream refused before answering, else the prompt estimate +
 * the relayed text's estimate, counted `estimated` in `iop_edge_client_tokens_total` when it is an
 * estimate). An unbudgeted client's attempt has no meter here (`callUpstream` counts it): its
 * lease is released with nothing charged. Each attempt of a failover has its own lease and is charged its own use. (The usage an
 * upstream reported is counted for every client as it is seen: `callUpstream`.)
 * @param cut true when the gateway aborted the attempt (client gone, a timeout, a fence, the drain)
 */
export async function releaseAttempt(
  req: CompletionRequest,
  lease: Lease | undefined,
  meter: AttemptTokens | undefined,
  cut: boolean,
): Promise<void> {
  const used = meter && countUsed(req, meter, cut);
  await lease?.release(used);
}

/**
 * What one attempt used ({@link AttemptTokens.used}), counted for the request's client in
 * `iop_edge_client_tokens_total` when it is the gateway's estimate (kind `estimated`; the usage an
 * upstream reported was counted as it was seen: {@link countReported}). Every attempt of every
 * client is counted once, by the caller that ends it: `releaseAttempt` for a budgeted client's
 * pooled attempt, `callUpstream` for any other (README "Metrics, dashboard and traces").
 * @param cut true when the gateway aborted the attempt (its signal fired)
 */
export function countUsed(req: CompletionRequest, meter: AttemptTokens, cut: boolean): UsedTokens {
  const used = meter.used(() => promptEstimate(req), cut);
  if (!used.reported) req.deps.clientTokens?.count(clientIdOf(req), 'estimated', used.tokens);
  return used;
}

/** The request's prompt estimate (`estimateTokenWeight`), tokens; made once, when first needed. */
function promptEstimate(req: CompletionRequest): number {
  req.tokenWeight ??= estimateTokenWeight(req.endpoint, req.body);
  return req.tokenWeight.prompt;
}

/** Counts what an upstream reported (`prompt`, `completion`) for `client`; nothing when it reported nothing. */
export function countReported(sink: ClientTokenSink | undefined, client: string, usage: TokenUsage | undefined): void {
  if (!sink || !usage) return;
  sink.count(client, 'prompt', usage.input);
  sink.count(client, 'completion', usage.output);
}

/** The request's client id, as the metrics name it ({@link ANONYMOUS_CLIENT} when none was set). */
export function clientIdOf(req: CompletionRequest): string {
  return (req.res.locals.client as QueueClient | undefined)?.id ?? ANONYMOUS_CLIENT.id;
}
