import type { ReplicaRequests } from './replica-requests';
import type { HealthStore, ProviderQueue, ResponseAffinity } from '@iop/dispatch';
import type { EdgeConfig } from '@iop/validate';
import type { Logger } from 'pino';
import type { ChatRequest, EmbeddingsRequest, ResponsesRequest } from '../adapters/adapter';
import type { AdapterRegistry } from '../adapters/adapter-registry';
import type { Endpoint } from '../adapters/request-fields';
import type { ProbeClock } from '../health/probe-clock';
import type { FirstByteClock } from './first-byte-clock';

/** The OpenAI endpoint a request came in on; picks the adapter method and its field table. */
export type CompletionEndpoint = Endpoint;

/** A request body as its route parsed it. */
export type DispatchBody = ChatRequest | ResponsesRequest | EmbeddingsRequest;

/** What a dispatch needs from the running gateway; `config()` is read once per request. */
export interface DispatcherDeps {
  config(): EdgeConfig;
  queue?: ProviderQueue;
  adapters: AdapterRegistry;
  logger: Logger;
  /** Provider health (README "Provider health"): providers out of it are not candidates; request results are recorded. */
  health?: HealthStore;
  /**
   * When each pool provider last sent a first byte, to weigh first-byte timeouts (README "Provider
   * health"); `createApp` makes one when absent. Without it every first-byte timeout counts.
   */
  firstBytes?: FirstByteClock;
  /**
   * The latest probe of each pool provider, as the gateway's prober ran it (`ProviderProber`), to
   * weigh a non-streamed request's first-byte timeout (README "Provider health"). Without it no
   * probe is known to pass, and such a timeout counts unless the provider answered others meanwhile.
   */
  probes?: ProbeClock;
  /** `previous_response_id` affinity for `/v1/responses` (README "Affinity"). */
  affinity?: ResponseAffinity;
  /** Each client's pooled requests on this replica, waiting or running (`ReplicaRequests`); `createApp` makes one when absent. */
  replicaRequests?: ReplicaRequests;
  /**
   * Aborted when the drain after SIGTERM runs out: every running request's upstream call is aborted
   * with `shuttingDown()`, so its client gets a 503 or the stream's error event before the
   * connection closes. The signal must allow one listener per running request (`setMaxListeners(0, …)`).
   */
  shutdown?: AbortSignal;
  /**
   * Where the tokens each client used are counted (`iop_edge_client_tokens_total`, README "Metrics,
   * dashboard and traces"); `createApp` gives the app's metrics. Absent: not counted.
   */
  clientTokens?: ClientTokenSink;
}

/**
 * Counts a client's tokens: `prompt` and `completion` as an upstream reported them, `estimated` for
 * a budgeted client's call cut short without usage (`AttemptTokens.used`). `client` is a client id.
 */
export interface ClientTokenSink {
  count(client: string, kind: 'prompt' | 'completion' | 'estimated', tokens: number): void;
}
