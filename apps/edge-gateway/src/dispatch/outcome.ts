import type { TokenUsage } from './token-usage';

/**
 * Where a request went, for the access log, the metrics and the trace (docs/architecture.md,
 * "Request path"): filled in by the dispatch steps, read by the request observer when the response
 * closes. A leaf module: the HTTP and observability code reads it without importing the dispatcher.
 */
export interface DispatchOutcome {
  routeKind: 'pool' | 'direct';
  nodeId?: string;
  resourceId?: string;
  queueWaitMs?: number;
  /** `performance.now()` when the upstream's first byte was in hand. */
  firstByteAt?: number;
  /** Providers tried before the one that answered (failover). */
  failedOver?: string[];
  /** `performance.now()` when the request started waiting for its lease (pooled requests). */
  queuedAt?: number;
  /** `performance.now()` when the call to the upstream that answered started. */
  upstreamStartedAt?: number;
  /** Type of the adapter that answered (`vllm`, `ollama`, `openai_compat`, `cli`). */
  adapterType?: string;
  /** Tokens the upstream reported in its `usage`, once the answer is done. */
  usage?: TokenUsage;
}
