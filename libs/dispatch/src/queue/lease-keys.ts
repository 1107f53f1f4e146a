/**
 * Redis key and channel layout of the Redis `ProviderQueue` backend (docs/architecture.md,
 * "Key layout"). Every key of one provider, and of every provider that can be a candidate of
 * the same request, shares one hash tag (`{<shardTag>}`), so an admission script touches one Redis
 * Cluster slot; providers of unrelated pools may live on other shards.
 *
 * | key (after `<prefix>:{<tag>}:`) | type | meaning |
 * |---|---|---|
 * | `provider.<id>:prioritized` | sorted set (BullMQ) | waiting jobs → `rank · 2^32 + start tag` (lowest first): `queued` = ZCARD (+ LLEN `wait`, kept empty) |
 * | `provider.<id>:active` | list (BullMQ) | jobs holding a lease: `in_flight` = LLEN |
 * | `provider.<id>:<jobId>` | hash (BullMQ job) | `name`, `data`, `opts`, `timestamp`, `priority`; `cl`, `pool`, `cap`, `band`, `st`, `cands` |
 * | `provider.<id>:leases` | sorted set | lease job id → expiry (Redis time, ms), renewed by its holder |
 * | `provider.<id>:limits` | hash | `max_concurrency`, `max_queued` as admission decides on them |
 * | `provider.<id>:wanted` | sorted set | `provider.<other>\|jobId` → its score: jobs queued on a sibling that list this provider |
 * | `clients` | hash | `a\|<pool>\|<client>` leases, `w\|<pool>\|<client>` waiting jobs of a client in a pool |
 * | `fair` | hash | `v\|<pool>\|<band>` virtual time, `f\|<pool>\|<band>\|<client>` finish tag (fair share) |
 * | `parked:<pool>\|<client>`, `parked` | sorted set, set | jobs parked at their client's `max_in_flight`; the clients with such a set |
 * | `shed:<jobId>` | string, PX | a waiting job evicted for a higher band, until its origin reads it |
 * | `budget:<client>` | hash, PX | a client's token budget windows, packed values (docs/architecture.md, "Token budgets"; `redis/budget-hash.ts`) |
 * | `seq` | string | not written: KEYS[1] of every script, it routes the call to the tag's slot |
 * | `granted` | hash | jobId → queue name, from a grant until the origin confirms it (lost-message recovery) |
 * | `barrier` | string, PX | set after Redis lost its state: no grants until live holders registered their leases again |
 *
 * Replica keys, on one slot of their own: `<prefix>:{replicas}:<id>` (string, PX: liveness),
 * `<prefix>:{replicas}:all` (set of replica ids). Channel `<prefix>:grant:<replica>` carries
 * `jobId|queueName`. Every Redis connection of a replica is named `<prefix>:replica:<id>`, so that a
 * replica whose process died is told apart from one that is only stalled (`CLIENT LIST`).
 * Health records: `<prefix>:{health}:<providerId>` (hash); response affinity:
 * `<prefix>:affinity:<responseId>` (string, single-key, any slot).
 *
 * BullMQ compatibility (docs/architecture.md, "Lease protocol"), and all it means: each provider's
 * waiting requests and leases are kept in BullMQ's key layout for a queue named `provider.<id>` under
 * the BullMQ prefix `<prefix>:{<tag>}` (`queueName`, `tagBase`): a waiting request is a job in
 * `prioritized` with BullMQ's score layout (priority = its band's rank), a lease a job in `active`,
 * each job a hash with BullMQ's fields. So BullMQ's own `Queue.getJobCounts()`,
 * `getCountsPerPriority()`, `getPrioritized()` and `getActive()` read the numbers admission decides on
 * (`in_flight` = LLEN `active`, `queued` = `wait` + `prioritized`), and a test pins that against BullMQ.
 * The status exporter keeps one BullMQ `Queue` per tracked provider on its one Redis connection, made
 * with `skipMetasUpdate` (else the `Queue` writes its `meta` hash), for its read-only Bull Board at
 * `/queues` (README "Status"); its counts it reads as the gateways do, with `scripts/counts.lua`
 * (`readQueueCounts`: providers' and clients' counts of a tag in one snapshot); a test pins that it
 * leaves every key as it found it.
 * That is all of BullMQ in production: the gateways never import it, no BullMQ worker ever runs on
 * these queues, and the Lua scripts make every grant.
 */
export class LeaseKeys {
  /**
   * @param prefix `queue.prefix`, no trailing `:`. A prefix that holds its own `{…}` puts every key on one slot.
   */
  constructor(readonly prefix: string) {}

  /** BullMQ queue name of a provider (BullMQ forbids `:` in names, so the id is URI-encoded). */
  queueName(providerId: string): string {
    return `provider.${encodeURIComponent(providerId)}`;
  }

  /** Provider id of a queue name made by `queueName`. */
  providerOf(queueName: string): string {
    return decodeURIComponent(queueName.slice('provider.'.length));
  }

  /** Key prefix of one shard tag: BullMQ's `prefix` option for the queues of that tag. */
  tagBase(shardTag: string): string {
    return `${this.prefix}:{${shardTag}}`;
  }

  /** A key of a provider queue: `wait`, `active`, `leases`, `limits`, `wanted`, or a job id. */
  queueKey(shardTag: string, providerId: string, type: string): string {
    return `${this.tagBase(shardTag)}:${this.queueName(providerId)}:${type}`;
  }

  /** A client's token budget hash on a shard tag (its values: `redis/budget-hash.ts`). */
  budgetKey(shardTag: string, clientId: string): string {
    return `${this.tagBase(shardTag)}:budget:${clientId}`;
  }

  livenessKey(replicaId: string): string {
    return `${this.prefix}:{replicas}:${replicaId}`;
  }

  /** The name of every Redis connection of that replica (`CLIENT SETNAME`). */
  connectionName(replicaId: string): string {
    return `${this.prefix}:replica:${replicaId}`;
  }

  get replicasKey(): string {
    return `${this.prefix}:{replicas}:all`;
  }

  /** A provider's shared health record (read by every replica and the exporter). */
  healthKey(providerId: string): string {
    return `${this.prefix}:{health}:${providerId}`;
  }

  /** Which provider produced a Responses API answer (`previous_response_id` affinity). */
  affinityKey(responseId: string): string {
    return `${this.prefix}:affinity:${responseId}`;
  }

  grantChannelPrefix(): string {
    return `${this.prefix}:grant:`;
  }

  grantChannel(replicaId: string): string {
    return `${this.grantChannelPrefix()}${replicaId}`;
  }
}

/** The shard tag used when a provider has none: every provider on one slot (a single Redis needs no more). */
export const DEFAULT_SHARD_TAG = 'pools';
