import type { EdgeConfig, QueueBackendChoice } from '@iop/validate';
import type pino from 'pino';

/**
 * Settings a reload cannot change in a running process (the queue backend and its Redis, the key
 * prefix, the listen address; README "Operating a running fleet"): a change is logged as needing a
 * restart; the process keeps the old ones. The backend and URL are compared as resolved
 * (`resolve`), so a file change that --redis or REDIS_URL overrides anyway is not reported.
 */
export function warnRestartOnly(
  initial: EdgeConfig,
  next: EdgeConfig,
  resolve: (c: EdgeConfig) => QueueBackendChoice,
  logger: pino.Logger,
): void {
  const [before, after] = [resolve(initial), resolve(next)];
  const fixed: Array<[string, unknown, unknown]> = [
    ['gateway.listen', initial.gateway.listen, next.gateway.listen],
    ['queue.backend', before.backend, after.backend],
    ['queue.redis_url', before.redisUrl, after.redisUrl],
    ['queue.prefix', initial.queue.prefix, next.queue.prefix],
  ];
  for (const [key, was, now] of fixed) {
    if (was !== now)
      logger.warn(
        { key },
        `${key} changed: it takes effect only after a restart; this process keeps the value it started with`,
      );
  }
}
