import {
  connectRedis,
  MemoryHealthStore,
  MemoryResponseAffinity,
  RedisHealthStore,
  RedisResponseAffinity,
  type HealthStore,
  type HealthTransition,
  type RedisClient,
  type ResponseAffinity,
} from '@iop/dispatch';
import type { CloseList } from '@iop/runtime';
import type { EdgeConfig, HealthSettings, QueueBackendChoice } from '@iop/validate';
import type pino from 'pino';

/**
 * What provider health and `previous_response_id` affinity are kept in: one fail-fast Redis
 * connection shared by both on the redis backend (the queue keeps its own), memory otherwise.
 */
export interface HealthAndAffinity {
  readonly health: HealthStore;
  readonly affinity: ResponseAffinity;
}

/**
 * Opens the Redis connection of health and affinity (the redis backend only) and registers its
 * close hook. A Redis outage is logged once when it starts and once when it ends (README
 * "Operating a running fleet"), not per provider per probe round: the queue logs its own, this
 * covers health and affinity.
 * @returns the connection, undefined on the memory backend, and the listener each store reports its Redis errors to
 */
export function openHealthRedis(
  choice: QueueBackendChoice,
  queue: EdgeConfig['queue'],
  logger: pino.Logger,
  toClose: CloseList,
): { redis?: RedisClient; redisError: (what: string) => (err: unknown) => void } {
  let redisOutage = false;
  const redisError = (what: string) => (err: unknown) => {
    if (redisOutage) return;
    redisOutage = true;
    logger.warn(
      { err: (err as Error).message, during: what },
      'redis unavailable for provider health and affinity; last known health kept until it is back',
    );
  };
  if (choice.backend !== 'redis' || choice.redisUrl === undefined) return { redisError };
  const redis = connectRedis({ url: choice.redisUrl, cluster: queue.cluster, failFast: true });
  toClose.add('redis', () => redis.disconnect());
  redis.on('error', () => undefined);
  redis.on('ready', () => {
    if (!redisOutage) return;
    redisOutage = false;
    logger.info('redis reachable again for provider health and affinity');
  });
  return { redis, redisError };
}

/**
 * The health store and the response affinity: shared in Redis under `prefix` when `redis` is
 * given, in memory otherwise. `settings` is read on every use, so a reload applies at once. Every
 * health transition is logged once, by the replica that made it (README "Provider health").
 */
export function openHealthAndAffinity(
  redis: RedisClient | undefined,
  prefix: string,
  settings: () => HealthSettings,
  redisError: (what: string) => (err: unknown) => void,
  logger: pino.Logger,
): HealthAndAffinity {
  const onTransition = (provider: string, t: HealthTransition) => {
    const line = { provider, from: t.from, to: t.to, reason: t.reason };
    const msg = `provider ${provider}: ${t.from} → ${t.to}${t.reason ? ` (${t.reason})` : ''}`;
    if (t.to === 'healthy') logger.info(line, msg);
    else logger.warn(line, msg);
  };
  if (!redis) return { health: new MemoryHealthStore(settings, onTransition), affinity: new MemoryResponseAffinity() };
  return {
    health: new RedisHealthStore(
      redis,
      prefix,
      settings,
      () => 3 * settings().interval_ms,
      redisError('health'),
      onTransition,
    ),
    affinity: new RedisResponseAffinity(redis, prefix, undefined, redisError('affinity')),
  };
}
