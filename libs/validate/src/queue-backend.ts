import type { EdgeConfig } from './schema';

/** The queue backend the gateway starts with and, for Redis, the URL it connects to. */
export interface QueueBackendChoice {
  backend: 'redis' | 'memory';
  /** Set exactly when `backend` is `redis`. */
  redisUrl?: string;
}

/** Redis URL used when `queue.backend: redis` is explicit but no URL is configured anywhere. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/**
 * Picks the queue backend (DESIGN §3 `queue.backend`):
 * - the URL is `queue.redis_url`, else env `REDIS_URL` (an empty value counts as unset);
 * - an explicit `queue.backend` wins; without one: `redis` when a URL is found, else `memory`;
 * - explicit `redis` without any URL uses {@link DEFAULT_REDIS_URL}.
 * A `--redis` command-line override is the caller's: apply it to `env.REDIS_URL` or the config first.
 * Pure; never throws.
 */
export function resolveQueueBackend(config: Pick<EdgeConfig, 'queue'>, env: Record<string, string | undefined> = process.env): QueueBackendChoice {
  const url = config.queue.redis_url || env['REDIS_URL'] || undefined;
  const backend = config.queue.backend ?? (url ? 'redis' : 'memory');
  return backend === 'redis' ? { backend, redisUrl: url ?? DEFAULT_REDIS_URL } : { backend };
}
