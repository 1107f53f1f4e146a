import type { Redis } from 'ioredis';
import { BullmqKeys } from './bullmq-keys';
import type { ProviderCounts } from './provider-queue';

/**
 * Reads the live counts of provider queues straight from Redis, for processes that run no
 * workers and hold no leases (the status exporter, tests). Exact across replicas (DESIGN §4):
 * - `inFlight` = `LLEN <queue>:active` (a lease is an active job);
 * - `queued` = `LLEN <queue>:wait` + `ZCARD <queue>:prioritized` + `LLEN <queue>:paused`
 *   (BullMQ 6 keeps jobs of a paused queue in `wait`; `paused` is its legacy list, normally absent).
 * Key types as in BullMQ 6.7 (`getCounts-1.lua`): `wait`, `active`, `paused` are lists,
 * `prioritized` a sorted set. One pipeline for all providers; a provider with no keys reads 0/0.
 * Read-only: never creates keys, never moves jobs.
 * @param prefix `queue.prefix` (no trailing `:`).
 * @throws the Redis error when any command fails (connection lost, wrong key type).
 */
export async function readBullmqCounts(redis: Redis, prefix: string, providerIds: readonly string[]): Promise<Map<string, ProviderCounts>> {
  const keys = new BullmqKeys(prefix);
  const out = new Map<string, ProviderCounts>();
  if (providerIds.length === 0) return out;
  const pipeline = redis.pipeline();
  for (const id of providerIds) {
    pipeline.llen(keys.queueKey(id, 'active'));
    pipeline.llen(keys.queueKey(id, 'wait'));
    pipeline.zcard(keys.queueKey(id, 'prioritized'));
    pipeline.llen(keys.queueKey(id, 'paused'));
  }
  const results = (await pipeline.exec()) ?? [];
  const numbers = results.map(([error, value], i) => {
    if (error) throw error;
    if (typeof value !== 'number') throw new Error(`readBullmqCounts: reply ${i} is not a number`);
    return value;
  });
  if (numbers.length !== providerIds.length * 4) throw new Error('readBullmqCounts: the pipeline was aborted');
  providerIds.forEach((id, i) => {
    const [active, wait, prioritized, paused] = numbers.slice(i * 4, i * 4 + 4);
    out.set(id, { inFlight: active, queued: wait + prioritized + paused });
  });
  return out;
}
