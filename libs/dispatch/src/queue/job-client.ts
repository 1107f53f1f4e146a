import { bandRank, tagCharge } from './fair-order';
import type { QueueClient } from './provider-queue';

/**
 * Who a job is for, as the lease scripts keep it (docs/architecture.md, "Clients, priority and fair
 * share"): its client in its pool. The scripts count the client's leases and waiting jobs per pool,
 * order its waiting jobs, park them at its `max_in_flight` and refuse over its `max_queued`.
 */
export interface JobClient {
  readonly pool: string;
  readonly client: QueueClient;
}

/** A lease as renewals name it: where it lives, and its client (registered again with it after Redis lost its state). */
export interface RenewedLease {
  readonly providerId: string;
  readonly jobId: string;
  readonly owner: JobClient;
}

/** How long the mark of a shed job stays in Redis for its origin to read (poll, leave), ms. */
export const SHED_MARK_MS = 60_000;

/** The grant-channel message that tells an origin its waiting job was shed: `<jobId>|!shed`. */
export const SHED_MESSAGE_SUFFIX = '!shed';

/**
 * The client part of `admit.lua`'s ARGV (ARGV[6..15]): client id, pool, band, BullMQ priority of the
 * band, the charge to its finish tag (1 / weight), `max_in_flight` and `max_queued` ('' for none),
 * the rank above which bands are sheddable (band 0's), how long a shed job's mark stays, ms, and
 * '1' for a solo client (`QueueClient.solo`: no counts kept) or ''.
 */
export function clientArgs({ pool, client }: JobClient): string[] {
  return [
    client.id,
    pool,
    String(client.band),
    String(bandRank(client.band)),
    String(tagCharge(client)),
    client.maxInFlight === undefined ? '' : String(client.maxInFlight),
    client.maxQueued === undefined ? '' : String(client.maxQueued),
    String(bandRank(0)),
    String(SHED_MARK_MS),
    isSolo(client) ? '1' : '',
  ];
}

/**
 * True for a client the queue may treat as the fleet's only one (`QueueClient.solo`): flagged so, and
 * with no cap, since a cap needs the counts that a solo client's jobs do not keep.
 */
export function isSolo(client: QueueClient): boolean {
  return client.solo === true && client.maxInFlight === undefined && client.maxQueued === undefined;
}

/**
 * A lease's client as `renew.lua` takes it: `<pool>|<client id>|<max_in_flight or ''>`, or '' for a
 * solo client (registered again without a count, as it was admitted).
 */
export function renewedClient({ pool, client }: JobClient): string {
  return isSolo(client) ? '' : `${pool}|${client.id}|${client.maxInFlight ?? ''}`;
}
