import { DEFAULT_QUEUE_CLIENT, type QueueClient } from './provider-queue';

/**
 * The order of waiting requests in a pool (docs/architecture.md, "Clients, priority and fair share"):
 * band first (higher first), then the start tag of start-time fair queueing (SFQ), then arrival. Both
 * backends order by {@link orderScore}: the memory backend here, the Redis backend in BullMQ's
 * `prioritized` sets, whose score layout (`priority · 2^32 + order`, lowest first) this is.
 */

/** BullMQ's `priority · 2^32 + counter` layout: the span of one priority's scores. */
export const PRIORITY_SPAN = 2 ** 32;

/** BullMQ's priority of a band: 1 for the highest band (1000), 2001 for the lowest (-1000); lower is served first. */
export function bandRank(band: number): number {
  return 1001 - band;
}

/** The band of a BullMQ priority made by {@link bandRank}. */
export function rankBand(rank: number): number {
  return 1001 - rank;
}

/** The score of a waiter: its band's rank in the high part, its start tag in the low part; lowest is served first. */
export function orderScore(band: number, startTag: number): number {
  return bandRank(band) * PRIORITY_SPAN + startTag;
}

/** What one request adds to its client's finish tag: 1 request, divided by the client's weight. */
export function tagCharge(client: QueueClient): number {
  return 1 / client.weight;
}

/** The client a request is for: its own, or the anonymous one. */
export function clientOf(request: { readonly client?: QueueClient }): QueueClient {
  return request.client ?? DEFAULT_QUEUE_CLIENT;
}

/**
 * SFQ tags of one process (the memory backend; the Redis backend keeps the same two numbers in the
 * tag's `fair` hash). Per pool and band: the virtual time `V`; per client: the finish tag `F_c`.
 */
export class FairTags {
  private readonly virtual = new Map<string, number>();
  private readonly finish = new Map<string, number>();

  /** The start tag of a request that has to wait: `S = max(V, F_c)`, and `F_c` becomes `S + 1/weight`. */
  arrive(pool: string, client: QueueClient): number {
    const start = this.peek(pool, client);
    this.finish.set(`${pool}|${client.band}|${client.id}`, start + tagCharge(client));
    return start;
  }

  /** The start tag a request of `client` would get now ({@link arrive}), changing nothing. */
  peek(pool: string, client: QueueClient): number {
    const band = `${pool}|${client.band}`;
    return Math.max(this.virtual.get(band) ?? 0, this.finish.get(`${band}|${client.id}`) ?? 0);
  }

  /** A waiter of `client` with start tag `start` left unserved (evicted): `F_c = min(F_c, S)`, as if it never came. */
  giveBack(pool: string, client: QueueClient, start: number): void {
    const key = `${pool}|${client.band}|${client.id}`;
    const finish = this.finish.get(key);
    if (finish !== undefined && finish > start) this.finish.set(key, start);
  }

  /** A waiter with start tag `start` was granted: `V = max(V, S)`. */
  granted(pool: string, band: number, start: number): void {
    const key = `${pool}|${band}`;
    this.virtual.set(key, Math.max(this.virtual.get(key) ?? 0, start));
  }
}
