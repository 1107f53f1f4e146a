import { bandRank, tagCharge } from './fair-order';
import type { QueueClient } from './provider-queue';
import { wholeChoices, wholeTokens, type HeldTokens, type TokenWeight } from './token-limit';

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
  /** The tokens it holds on a provider with a token limit (registered again with it), if any. */
  readonly tokens?: HeldTokens;
}

/**
 * What the holder knows of a lease it ends (`LeaseStore.release`): of a solo client (no count to read
 * or end), confirmed (no unconfirmed-grant entry), its job had a token weight or its client a token
 * budget (`tokened`: it may hold tokens or a reservation), and the tokens the call used (`used`:
 * charged to the budget in place of the reservation; absent: the reservation as it stands).
 */
export interface HeldLeaseFacts {
  readonly solo?: boolean;
  readonly confirmed?: boolean;
  readonly tokened?: boolean;
  readonly used?: number;
}

/**
 * The budget part of `admit.lua`'s ARGV (ARGV[18]): `<weight>|<per minute or ''>|<per day or ''>` for a
 * client with a token budget (docs/architecture.md, "Token budgets"), '' otherwise.
 */
export function budgetArg(client: QueueClient, weight: number): string {
  const b = client.tokenBudgets;
  if (b?.perMinute === undefined && b?.perDay === undefined) return '';
  return `${tokenText(weight)}|${b.perMinute ?? ''}|${b.perDay ?? ''}`;
}

/**
 * The token part of `admit.lua`'s ARGV (ARGV[16..17]): the prompt estimate and the completion
 * allowance: its tokens in digits; for a weight that names none, '' (each provider's default) or
 * `*<choices>` (each provider's default times `wholeChoices(tokens.choices)` when above 1: README
 * "Token-aware provider limits"; `includes/tokens.lua`'s `completionOf`); two '' for a request
 * without a weight.
 */
export function tokenArgs(tokens: TokenWeight | undefined): string[] {
  if (!tokens) return ['', ''];
  return [tokenText(tokens.prompt), completionArg(tokens)];
}

function completionArg(tokens: TokenWeight): string {
  if (tokens.completion !== undefined) return tokenText(tokens.completion);
  const choices = wholeChoices(tokens.choices);
  return choices > 1 ? `*${choices}` : '';
}

/**
 * A token count as a script argument: `wholeTokens`'s, in plain digits (never `1e+21` or
 * `Infinity`, which the scripts' patterns and `%d` fields do not read).
 */
export function tokenText(n: number): string {
  return String(wholeTokens(n));
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
