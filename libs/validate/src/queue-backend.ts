import { isRedisUrl, redactUrl } from './listen-address';
import type { EdgeConfig } from './schema';

/** Where the Redis URL of a `redis` choice came from, highest precedence first. */
export type RedisUrlSource = '--redis' | 'REDIS_URL' | 'queue.redis_url' | 'default';

/** The queue backend a process starts with and, for Redis, the URL it connects to. */
export interface QueueBackendChoice {
  backend: 'redis' | 'memory';
  /** Set exactly when `backend` is `redis`. */
  redisUrl?: string;
  /** Where `redisUrl` came from; set exactly when `backend` is `redis`. */
  source?: RedisUrlSource;
  /**
   * Why this backend, in words, for the startup log and error messages; never contains a URL
   * (e.g. `REDIS_URL overrides queue.backend: memory`).
   */
  reason: string;
}

/** What can override the file: the command line (`--redis URL`). */
export interface QueueBackendOverrides {
  /** `--redis URL`; beats `REDIS_URL` and the file. An empty value counts as unset. */
  redis?: string;
}

/** A Redis URL from `REDIS_URL` (or `--redis`) that is not a `redis://`/`rediss://` URL. */
export class QueueBackendError extends Error {}

/** Redis URL used when `queue.backend: redis` is explicit but no URL is given anywhere. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/**
 * Picks the queue backend; the one rule for the gateway and the status exporter (README
 * "Configuration", `queue.backend`):
 * 1. a Redis URL from the command line (`--redis`) or the environment (`REDIS_URL`) selects the
 *    `redis` backend, whatever `queue.backend` says, so a URL given to a process is never ignored;
 * 2. the URL is the first of `--redis`, `REDIS_URL`, `queue.redis_url` (command line beats the
 *    environment, which beats the file); an empty value counts as unset;
 * 3. otherwise the file decides: `queue.backend` when set (`redis` without any URL uses
 *    {@link DEFAULT_REDIS_URL}), else `redis` when `queue.redis_url` is set, else `memory`.
 *    `queue.backend: memory` keeps a `queue.redis_url` of the same file unused (the reason says so).
 * Pure.
 * @throws QueueBackendError when the chosen URL (from `--redis` or `REDIS_URL`) is not a
 * redis:// or rediss:// URL (`queue.redis_url` is checked by the schema); the message is redacted.
 */
export function resolveQueueBackend(
  config: Pick<EdgeConfig, 'queue'>,
  env: Record<string, string | undefined> = process.env,
  overrides: QueueBackendOverrides = {},
): QueueBackendChoice {
  const fileBackend = config.queue.backend;
  const fileUrl = config.queue.redis_url || undefined;
  const cliUrl = overrides.redis || undefined;
  const envUrl = env['REDIS_URL'] || undefined;

  const given: Array<[RedisUrlSource, string | undefined]> = [
    ['--redis', cliUrl],
    ['REDIS_URL', envUrl],
  ];
  for (const [source, url] of given) {
    if (url === undefined) continue;
    if (!isRedisUrl(url))
      throw new QueueBackendError(
        `${source}: "${redactUrl(url)}" is not a redis://, rediss:// or redis+sentinel:// URL (percent-encode "/", "?" or "#" in a password)`,
      );
    const overridden = [
      ...(source === '--redis' && envUrl ? ['REDIS_URL'] : []),
      ...(fileBackend === 'memory' ? ['queue.backend: memory'] : []),
      ...(fileUrl ? ['queue.redis_url'] : []),
    ];
    const reason = overridden.length ? `${source} overrides ${joinAnd(overridden)}` : `${source} is set`;
    return { backend: 'redis', redisUrl: url, source, reason };
  }

  if (fileBackend === 'memory') {
    return {
      backend: 'memory',
      reason: fileUrl
        ? 'queue.backend: memory; the queue.redis_url of the same file is not used'
        : 'queue.backend: memory',
    };
  }
  if (fileUrl)
    return {
      backend: 'redis',
      redisUrl: fileUrl,
      source: 'queue.redis_url',
      reason: fileBackend ? 'queue.backend: redis at queue.redis_url' : 'queue.redis_url is set',
    };
  if (fileBackend === 'redis') {
    return {
      backend: 'redis',
      redisUrl: DEFAULT_REDIS_URL,
      source: 'default',
      reason: 'queue.backend: redis and no --redis, REDIS_URL or queue.redis_url: the default URL',
    };
  }
  return { backend: 'memory', reason: 'no --redis, REDIS_URL or queue.redis_url' };
}

/**
 * The startup log line for a choice, credentials redacted:
 * `queue backend: redis at redis://***@host:6379 (REDIS_URL overrides queue.backend: memory)`.
 */
export function describeQueueBackend(choice: QueueBackendChoice): string {
  const where = choice.redisUrl ? ` at ${redactUrl(choice.redisUrl)}` : '';
  return `queue backend: ${choice.backend}${where} (${choice.reason})`;
}

/** ["a"] → "a"; ["a", "b", "c"] → "a, b and c". */
function joinAnd(items: string[]): string {
  return items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}
