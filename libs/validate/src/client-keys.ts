import { createHash, timingSafeEqual } from 'node:crypto';
import type { GatewaySettings } from './schema';

/**
 * A client as the gateway knows it at run time (docs/architecture.md, "Clients, priority and fair
 * share"): never its keys. `priority` is its band (-1000..1000), `weight` its share inside the band
 * (1..100); `maxInFlight` and `maxQueued` are per pool, absent = no cap (`configuredClients` gives a
 * `maxQueued` to every client but the fleet's sole one: {@link defaultClientMaxQueued}). `tokenBudgets` are its
 * `tokens_per_minute` / `tokens_per_day` (docs/architecture.md, "Token budgets"; the shape of
 * `QueueClient.tokenBudgets` in `@iop/dispatch`), absent when it sets neither.
 */
export interface FlowClient {
  readonly id: string;
  readonly priority: number;
  readonly weight: number;
  readonly maxInFlight?: number;
  readonly maxQueued?: number;
  readonly tokenBudgets?: { readonly perMinute?: number; readonly perDay?: number };
}

/** The client of every request when no key is configured at all. */
export const ANONYMOUS_CLIENT: FlowClient = { id: 'anonymous', priority: 0, weight: 1 };

/**
 * The `max_queued` of a client that sets none (README "Clients, priority and fair share"; docs/architecture.md,
 * "Clients, priority and fair share"): half of `gateway.max_connections`, rounded up, in requests
 * waiting (parked or queued) per pool. A waiting request holds a client connection, so one client
 * can never hold every connection of a process with waiting requests: the others, and `/healthz`,
 * keep the other half. The same share as `max_connections_per_address` (README "Security").
 */
export function defaultClientMaxQueued(maxConnections: number): number {
  return Math.ceil(maxConnections / 2);
}

/** The id of the key at `index` of the flat `gateway.api_keys` list: its path in the file. */
export function flatKeyClientId(index: number): string {
  return `api_keys[${index}]`;
}

/** The gateway settings that make the clients: the keys, the named clients and `max_connections` (the default `max_queued`). */
export type ClientSettings = Pick<GatewaySettings, 'api_keys' | 'clients' | 'max_connections'>;

/**
 * Every client of the gateway settings with its keys: `gateway.clients` in file order, then one client
 * of default settings per key of the flat `gateway.api_keys` list (id `api_keys[<index>]`). A client
 * without its own `max_queued` gets {@link defaultClientMaxQueued} of `max_connections`, unless flow
 * control is off ({@link soleClient}: the fleet's one client keeps no counts to cap, has no
 * `max_in_flight` to be parked at, and waits only in the providers' queues, bounded by their
 * `max_queued`). So both queue backends get the default as a client's own `maxQueued`. Pure.
 */
export function configuredClients(gateway: ClientSettings): {
  client: FlowClient;
  keys: readonly string[];
}[] {
  const fallback = soleClient(gateway) ? undefined : defaultClientMaxQueued(gateway.max_connections);
  const maxQueuedOf = (own: number | undefined) => {
    const cap = own ?? fallback;
    return cap !== undefined ? { maxQueued: cap } : {};
  };
  const named = gateway.clients.map((c) => ({
    client: {
      id: c.id,
      priority: c.priority,
      weight: c.weight,
      ...(c.max_in_flight !== undefined ? { maxInFlight: c.max_in_flight } : {}),
      ...maxQueuedOf(c.max_queued),
      ...tokenBudgetsOf(c),
    },
    keys: c.keys,
  }));
  const flat = gateway.api_keys.map((key, i) => ({
    client: { id: flatKeyClientId(i), priority: 0, weight: 1, ...maxQueuedOf(undefined) },
    keys: [key],
  }));
  return [...named, ...flat];
}

/** `tokenBudgets` of a configured client: its windows that are set, or nothing when it sets neither. */
function tokenBudgetsOf(c: { tokens_per_minute?: number; tokens_per_day?: number }): Pick<FlowClient, 'tokenBudgets'> {
  if (c.tokens_per_minute === undefined && c.tokens_per_day === undefined) return {};
  return {
    tokenBudgets: {
      ...(c.tokens_per_minute !== undefined ? { perMinute: c.tokens_per_minute } : {}),
      ...(c.tokens_per_day !== undefined ? { perDay: c.tokens_per_day } : {}),
    },
  };
}

/**
 * True when any configured client has a token budget (docs/architecture.md, "Token budgets"): then
 * every pool provider shares one Redis Cluster hash tag, so one script sees a client's budget
 * whatever pool its request is for. Pure.
 */
export function anyTokenBudget(gateway: Pick<GatewaySettings, 'clients'>): boolean {
  return gateway.clients.some((c) => c.tokens_per_minute !== undefined || c.tokens_per_day !== undefined);
}

/**
 * True when flow control is off: no `gateway.clients` and at most one flat key, so every request of
 * the fleet is one client (`anonymous` or `api_keys[0]`) of default settings (README "Clients,
 * priority and fair share"). Its requests are then served in arrival order within a band, whatever
 * the backend keeps, and its counts are the pools' counts. Pure.
 */
export function soleClient(gateway: Pick<GatewaySettings, 'api_keys' | 'clients'>): boolean {
  return gateway.clients.length === 0 && gateway.api_keys.length <= 1;
}

const digest = (key: string) => createHash('sha256').update(key).digest();

/**
 * Resolves a presented bearer key to its client in constant time (README "Security"): the key's
 * SHA-256 digest is compared with `timingSafeEqual` against the digest of every configured key,
 * whatever the outcome, so neither a key's content, its length nor which client it belongs to leaks
 * through timing.
 */
export class ClientKeys {
  private readonly digests: Buffer[] = [];
  private readonly owners: FlowClient[] = [];
  /** Every configured client, for `/status` and the metrics' `client` label. */
  readonly clients: readonly FlowClient[];

  constructor(gateway: ClientSettings) {
    const entries = configuredClients(gateway);
    for (const { client, keys } of entries) {
      for (const key of keys) {
        this.digests.push(digest(key));
        this.owners.push(client);
      }
    }
    this.clients = entries.length > 0 ? entries.map((e) => e.client) : [ANONYMOUS_CLIENT];
    this.sole = soleClient(gateway);
  }

  /** True when the fleet has one client only ({@link soleClient}): flow control is off. */
  readonly sole: boolean;

  /** True when no key is configured: every request is {@link ANONYMOUS_CLIENT}. */
  get open(): boolean {
    return this.digests.length === 0;
  }

  /**
   * The client whose key `presented` is; {@link ANONYMOUS_CLIENT} when no key is configured;
   * `undefined` when keys are configured and `presented` matches none (or is absent).
   */
  resolve(presented: string | undefined): FlowClient | undefined {
    if (this.open) return ANONYMOUS_CLIENT;
    if (presented === undefined) return undefined;
    const d = digest(presented);
    let found = -1;
    for (let i = 0; i < this.digests.length; i++) {
      const equal = timingSafeEqual(this.digests[i], d);
      found = equal ? i : found;
    }
    return found < 0 ? undefined : this.owners[found];
  }
}
