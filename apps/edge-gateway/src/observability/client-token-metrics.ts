import { Counter, type Registry } from 'prom-client';

/**
 * Kinds of `iop_edge_client_tokens_total`: `prompt` and `completion` as the upstream reported them in
 * its `usage` (`prompt_tokens`/`input_tokens`, `completion_tokens`/`output_tokens`); `estimated`, the
 * gateway's estimate charged to a budgeted client for a call cut short without usage (README
 * "Token budgets: what a client sees").
 */
export type ClientTokenKind = 'prompt' | 'completion' | 'estimated';

/**
 * `iop_edge_client_tokens_total{client,kind}` (README "Metrics, dashboard and traces"): the tokens
 * each client used, on the gateway's registry. `client` is the client's id (a config id,
 * `api_keys[<n>]` or `anonymous`: bounded by the config, never a key), `kind` a {@link ClientTokenKind}.
 * Label objects are built once per (client, kind) and reused.
 */
export class ClientTokenCounter {
  private readonly counter: Counter<'client' | 'kind'>;
  private readonly labels = new Map<string, { client: string; kind: ClientTokenKind }>();

  constructor(registry: Registry) {
    this.counter = new Counter({
      name: 'iop_edge_client_tokens_total',
      help: 'Tokens used per client: prompt and completion as upstreams reported them, estimated for calls cut short without usage (budgeted clients).',
      labelNames: ['client', 'kind'] as const,
      registers: [registry],
    });
  }

  /**
   * Adds `tokens` of `kind` to `client`. Counts reach here bounded (`tokenCount`); anything that is
   * not a finite number > 0 adds nothing, so no value can make prom-client throw.
   */
  count(client: string, kind: ClientTokenKind, tokens: number): void {
    if (!(tokens > 0 && Number.isFinite(tokens))) return;
    const key = `${kind}\n${client}`;
    let l = this.labels.get(key);
    if (!l) this.labels.set(key, (l = { client, kind }));
    this.counter.inc(l, tokens);
  }
}
