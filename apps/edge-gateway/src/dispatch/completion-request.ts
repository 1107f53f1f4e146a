import type { TokenWeight } from '@iop/dispatch';
import type { EdgeConfig } from '@iop/validate';
import type { GatewayResponse } from '../http/gateway-handler';
import { randomUUID } from 'node:crypto';
import type { CompletionEndpoint, DispatchBody, DispatcherDeps } from './dispatcher-deps';
import type { DispatchOutcome } from './outcome';

/** One completion request as every step of its dispatch sees it. */
export interface CompletionRequest {
  deps: DispatcherDeps;
  endpoint: CompletionEndpoint;
  body: DispatchBody;
  res: GatewayResponse;
  /** The config in force when the request started: read once, so a refresh never changes a running request. */
  config: EdgeConfig;
  /** Filled in by the steps (route kind, node, provider, timings) for the access log and metrics. */
  outcome: DispatchOutcome;
  /** The `x-request-id` of the answer; log lines and generic client errors name it. */
  requestId: string;
  /** Its token weight once a candidate with a token limit, or the client's token budget, asked for it (`estimateTokenWeight`). */
  tokenWeight?: TokenWeight;
}

/** The request id of `res` (`x-request-id`, set by the request observer), or a fresh one. */
function requestIdOf(res: GatewayResponse): string {
  const id = res.getHeader('x-request-id');
  if (typeof id === 'string' && id !== '') return id;
  const fresh = randomUUID();
  if (!res.headersSent) res.setHeader('x-request-id', fresh);
  return fresh;
}

/** The first step of a dispatch: reads the config once and fixes the request id. */
export function startRequest(
  deps: DispatcherDeps,
  endpoint: CompletionEndpoint,
  body: DispatchBody,
  res: GatewayResponse,
  outcome: DispatchOutcome,
): CompletionRequest {
  const config = deps.config();
  return { deps, endpoint, body, res, config, outcome, requestId: requestIdOf(res) };
}
