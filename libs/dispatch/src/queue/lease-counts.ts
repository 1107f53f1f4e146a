import { LeaseKeys } from './lease-keys';
import type { StoredProvider } from './lease-store';
import type { ClientCounts, ProviderCounts } from './provider-queue';
import type { RedisClient } from './redis-connection';

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
  const byClient = new Map<string, { pool: string; clientId: string; inFlight: number; queued: number }>();
  for (const hash of hashes) {
    for (const [field, value] of Object.entries(hash)) {
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
