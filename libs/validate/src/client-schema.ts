import { z } from 'zod';
import { apiKey, DEFAULT_IN_WORDS, id } from './schema-fields';

/**
 * The shapes of client identities in `edge.yaml` (docs/architecture.md, "Clients, priority and fair
 * share"; README "Clients, priority and fair share"): the bearer keys and `gateway.clients`. Rules that
 * relate clients to each other or to the pools (unique ids and keys, caps a pool can reach) live in
 * `client-rules.ts`.
 */

/** Lowest and highest `priority` (band) a client or the `x-iop-priority` header may give. */
export const MIN_PRIORITY = -1000;
export const MAX_PRIORITY = 1000;
/** Largest `weight`: the fair-share order keeps tags to 1/512 of a request, so weights stay well apart. */
export const MAX_WEIGHT = 100;

/** An integer setting in [min, max]; every issue's fix names the range. */
const intIn = (min: number, max: number, what: string) => {
  const fix = `write ${what} as a whole number from ${min} to ${max}`;
  return z.number({ error: fix }).int(fix).min(min, fix).max(max, fix);
};

/** A token budget: a whole number of tokens ≥ 1, optional; every issue's fix names the setting. */
const tokenBudget = (what: string) => {
  const fix = `write ${what} as a whole number of tokens, 1 or more (e.g. ${what}: 100000), or remove it for no budget`;
  return z.number({ error: fix }).int(fix).min(1, fix).max(Number.MAX_SAFE_INTEGER, fix).optional();
};

/**
 * A client's cap: a whole number ≥ `min`, optional; every issue's fix names the setting (an `.inf`
 * included) and what removing it gives (`removed`).
 */
const capAtLeast = (min: number, what: string, removed: string) => {
  const fix = `set ${what} to ${min} or more, or remove it for ${removed}`;
  return z.number({ error: fix }).int(fix).min(min, fix).optional();
};

/** One entry of `gateway.clients`: an identity for one or more keys, with its band, weight and caps. */
export const clientSchema = z.strictObject({
  /** The client's name in logs, `/status` and the `client` label of metrics; never a key. */
  id: id.meta({
    description:
      "The client's name in logs, `/status` and the `client` label of metrics (letters, digits, `.`, `_`, `-`); unique; never a key.",
  }),
  /** Bearer keys of this client (`${VAR}` friendly); each unique across the file. */
  keys: z
    .array(apiKey)
    .min(1, 'give the client at least one key, e.g. keys: ["${TEAM_KEY}"]')
    .meta({ description: 'Bearer keys of this client (`${VAR}` friendly); each unique across the file.' }),
  /** Band: higher is served first; negative is sheddable when a queue is full. @defaultValue 0 */
  priority: intIn(MIN_PRIORITY, MAX_PRIORITY, 'priority')
    .default(0)
    .meta({ description: 'Band: higher is served first; negative is sheddable when a queue is full.' }),
  /** Share of slots inside its band while backlogged, relative to other clients' weights. @defaultValue 1 */
  weight: intIn(1, MAX_WEIGHT, 'weight')
    .default(1)
    .meta({ description: "Share of slots inside its band while backlogged, relative to other clients' weights." }),
  /** Leases the client may hold at once in one pool, across every replica; over it requests wait. */
  max_in_flight: capAtLeast(1, 'max_in_flight', 'no cap').meta({
    description: 'Leases the client may hold at once in one pool, across every replica; over it requests wait.',
    [DEFAULT_IN_WORDS]: 'no cap',
  }),
  /** Requests the client may have waiting in one pool, across every replica; over it `429 queue_full`. */
  max_queued: capAtLeast(0, 'max_queued', 'the default (half of gateway.max_connections)').meta({
    description:
      'Requests the client may have waiting in one pool, across every replica (parked requests count); over it 429 `queue_full`.',
    [DEFAULT_IN_WORDS]: 'half of `gateway.max_connections`, rounded up',
  }),
  /**
   * Tokens (estimated prompt + completion allowance, settled with the tokens used at release) the
   * client may use in any sliding minute, fleet-wide; over it `429 rate_limit_exceeded`
   * (docs/architecture.md, "Token budgets"). Absent: no per-minute budget.
   */
  tokens_per_minute: tokenBudget('tokens_per_minute').meta({
    description:
      'Tokens (estimated prompt + completion allowance, settled with the tokens used at release) the client may use in any sliding minute, fleet-wide over every pool; over it 429 `rate_limit_exceeded` (README "Token budgets").',
    [DEFAULT_IN_WORDS]: 'no budget',
  }),
  /** The same over a sliding day (86,400 s). Absent: no per-day budget. */
  tokens_per_day: tokenBudget('tokens_per_day').meta({
    description: 'Tokens the client may use in any sliding day (86,400 s), as `tokens_per_minute`; not below it.',
    [DEFAULT_IN_WORDS]: 'no budget',
  }),
});

export type ClientConfig = z.output<typeof clientSchema>;
