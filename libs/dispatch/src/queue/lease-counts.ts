import { LeaseKeys } from './lease-keys';
import type { StoredProvider } from './lease-store';
import type { ClientCounts, ProviderCounts, QueueCounts } from './provider-queue';
import type { RedisClient } from './redis-connection';
import { LEASE_SCRIPTS } from './scripts/lease-scripts';

/**
 * Reads the live counts of providers straight from Redis, for the gateway and for tests (the status
 * exporter reads the same numbers through BullMQ's `Queue`; docs/architecture.md, "Status model"):
 * `inFlight` = `LLEN active`, `queued` = `LLEN wait` + `ZCARD prioritized` (BullMQ's `wait +
 * prioritized`; waiting jobs are in `prioritized`, in the order of docs/architecture.md, "Clients,
 * priority and fair share"), the numbers admission decides on; for a provider marked `tokened`,
 * `tokensInFlight` = GET `tokens` (docs/architecture.md, "Token limits"). Read-only; a provider with
 * no keys reads 0/0. One pipeline per shard tag.
 * @param prefix `queue.prefix` (no trailing `:`).
 * @throws the Redis error when any command fails (connection lost, wrong key type).
 */
export async function readLeaseCounts(
  redis: RedisClient,
  prefix: string,
  providers: readonly StoredProvider[],
): Promise<Map<string, ProviderCounts>> {
  const keys = new LeaseKeys(prefix);
  const out = new Map<string, ProviderCounts>();
  // One pipeline per shard tag: a cluster pipeline must stay on one slot.
  const byTag = new Map<string, StoredProvider[]>();
  for (const p of providers) byTag.set(p.shardTag, [...(byTag.get(p.shardTag) ?? []), p]);
  await Promise.all(
    [...byTag.values()].map(async (group) => {
      const pipeline = redis.pipeline();
      let expected = 0;
      for (const p of group) {
        pipeline.llen(keys.queueKey(p.shardTag, p.providerId, 'active'));
        pipeline.llen(keys.queueKey(p.shardTag, p.providerId, 'wait'));
        pipeline.zcard(keys.queueKey(p.shardTag, p.providerId, 'prioritized'));
        if (p.tokened) pipeline.get(keys.queueKey(p.shardTag, p.providerId, 'tokens'));
        expected += p.tokened ? 4 : 3;
      }
      const results = (await pipeline.exec()) ?? [];
      const numbers = results.map(([error, value], i) => {
        if (error) throw error;
        // GET of a token count: a decimal string, or null when no lease ever held tokens.
        if (value === null || typeof value === 'string') return Number(value ?? 0);
        if (typeof value !== 'number') throw new Error(`readLeaseCounts: reply ${i} is not a number`);
        return value;
      });
      if (numbers.length !== expected) throw new Error('readLeaseCounts: the pipeline was aborted');
      let at = 0;
      for (const p of group) {
        const c: ProviderCounts = { inFlight: numbers[at], queued: numbers[at + 1] + numbers[at + 2] };
        if (p.tokened) c.tokensInFlight = numbers[at + 3];
        out.set(p.providerId, c);
        at += p.tokened ? 4 : 3;
      }
    }),
  );
  return new Map(providers.map((p) => [p.providerId, out.get(p.providerId)!]));
}

/**
 * Every client's counts per pool on the given shard tags, straight from Redis, for the gateway and the
 * status exporter (`<base>:clients`:
 * fields `a|<pool>|<client>` leases, `w|<pool>|<client>` waiting jobs; docs/architecture.md,
 * "Clients, priority and fair share"), one `HGETALL` per tag; clients with nothing held or waiting
 * are left out. Read-only.
 * @throws the Redis error when a command fails.
 */
export async function readClientCounts(
  redis: RedisClient,
  prefix: string,
  shardTags: readonly string[],
): Promise<ClientCounts[]> {
  const keys = new LeaseKeys(prefix);
  const hashes = await Promise.all(shardTags.map((tag) => redis.hgetall(`${keys.tagBase(tag)}:clients`)));
  return clientCountsOf(hashes.map((hash) => Object.entries(hash)));
}

/**
 * Providers' and clients' counts in one snapshot (`ProviderQueue.snapshotCounts`; docs/architecture.md,
 * "Status model"), for the gateway's `/status` and the status exporter: per shard tag one call of the
 * read-only `scripts/counts.lua`, which reads the tag's providers' counts (as `readLeaseCounts`) and
 * its `clients` hash (as `readClientCounts`) atomically, so that within a tag a pool's clients' `queued`
 * minus its providers' `queued` is exactly its parked waiters (README "Clients, priority and fair
 * share"). Every key the script reads is in its KEYS, all of the tag's slot.
 * Tags are read by separate calls, sent together: on a Redis Cluster a script runs on one slot, so
 * two pools on different tags are each consistent but not of one instant with each other (a pool is
 * one tag, so each pool's numbers add up); on a single Redis every provider shares the tag `pools`
 * and the whole snapshot is one call. Cost: one `FCALL` (or `EVALSHA`) per tag, running 3 reads per
 * provider (4 with a token limit) and one `HGETALL`.
 * @param prefix `queue.prefix` (no trailing `:`).
 * @param shardTags tags whose clients to read besides the providers' own (tags of leases a reload moved;
 *   `readClientCounts`); a tag without providers reads its clients hash alone.
 * @throws the Redis error when a call fails (connection lost, wrong key type).
 */
export async function readQueueCounts(
  redis: RedisClient,
  prefix: string,
  providers: readonly StoredProvider[],
  shardTags: readonly string[] = [],
): Promise<QueueCounts> {
  const keys = new LeaseKeys(prefix);
  const byTag = new Map<string, StoredProvider[]>(shardTags.map((tag) => [tag, []]));
  for (const p of providers) byTag.set(p.shardTag, [...(byTag.get(p.shardTag) ?? []), p]);
  const out = new Map<string, ProviderCounts>();
  const hashes = await Promise.all(
    [...byTag].map(async ([tag, group]) => {
      const queueKeys = group.flatMap((p) => [
        keys.queueKey(tag, p.providerId, 'active'),
        keys.queueKey(tag, p.providerId, 'wait'),
        keys.queueKey(tag, p.providerId, 'prioritized'),
        ...(p.tokened ? [keys.queueKey(tag, p.providerId, 'tokens')] : []),
      ]);
      const { values } = await LEASE_SCRIPTS.counts.run(
        redis,
        [`${keys.tagBase(tag)}:clients`, ...queueKeys],
        group.map((p) => (p.tokened ? '1' : '')),
      );
      let at = 0;
      for (const p of group) {
        const c: ProviderCounts = { inFlight: Number(values[at]), queued: Number(values[at + 1]) };
        if (p.tokened) c.tokensInFlight = Number(values[at + 2]);
        out.set(p.providerId, c);
        at += p.tokened ? 3 : 2;
      }
      const fields: [string, string][] = [];
      for (let i = at; i + 1 < values.length; i += 2) fields.push([values[i], values[i + 1]]);
      return fields;
    }),
  );
  return {
    providers: new Map(providers.map((p) => [p.providerId, out.get(p.providerId) ?? { inFlight: 0, queued: 0 }])),
    clients: clientCountsOf(hashes),
  };
}

/**
 * Client counts from `clients` hashes, as field-value pairs per tag (`a|<pool>|<client>` leases,
 * `w|<pool>|<client>` waiting jobs), summed per pool and client; clients with nothing held or waiting
 * left out.
 */
function clientCountsOf(hashes: readonly (readonly [string, string])[][]): ClientCounts[] {
  const byClient = new Map<string, { pool: string; clientId: string; inFlight: number; queued: number }>();
  for (const hash of hashes) {
    for (const [field, value] of hash) {
      const [which, pool, ...rest] = field.split('|');
      const clientId = rest.join('|');
      const entry = byClient.get(`${pool}|${clientId}`) ?? { pool, clientId, inFlight: 0, queued: 0 };
      if (which === 'a') entry.inFlight += Number(value);
      else entry.queued += Number(value);
      byClient.set(`${pool}|${clientId}`, entry);
    }
  }
  return [...byClient.values()].filter((c) => c.inFlight !== 0 || c.queued !== 0);
}
