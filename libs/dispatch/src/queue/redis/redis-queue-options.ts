import { consoleLibLogger, type LibLogger } from '@iop/validate';
import { randomUUID } from 'node:crypto';

/**
 * Where the Redis backend reports what it cannot throw (connection errors, fenced or swept leases):
 * the libs' one logger shape, {@link LibLogger} (pino's `(obj, msg)`, errors as `{ err }`), so a
 * pino logger fits as it is.
 */
export type QueueLogger = LibLogger;

/** Options of `RedisProviderQueue` (docs/architecture.md, "Lease protocol"). */
export interface RedisProviderQueueOptions {
  /** Redis to use, e.g. `redis://127.0.0.1:6379` or `rediss://user:pass@host:6380` (`queue.redis_url`). */
  readonly redisUrl: string;
  /** Key prefix shared by every replica of one deployment (`queue.prefix`); no `:` at the end. */
  readonly prefix: string;
  /**
   * `redisUrl` is a seed node of a Redis Cluster (`queue.cluster`); providers spread over shards by shard tag.
   * @defaultValue false
   */
  readonly cluster?: boolean;
  /**
   * This replica's id in job ids, grants and connection names; unique per process.
   * @defaultValue a random UUID
   */
  readonly replicaId?: string;
  /**
   * Lifetime of a lease (and of a replica's liveness key) between renewals, in ms. A replica killed
   * with SIGKILL frees its slots about this long after its last renewal plus one `sweepIntervalMs`;
   * a holder that could not renew for `leaseTtlMs - fenceMarginMs` aborts its upstream call (fencing).
   * @defaultValue 2000
   */
  readonly leaseTtlMs?: number;
  /**
   * How often a replica renews its leases and its liveness key, in ms; at most `leaseTtlMs / 3`, so
   * an event loop blocked for a whole second loses nothing.
   * @defaultValue 500
   */
  readonly renewIntervalMs?: number;
  /**
   * Safety margin of fencing, in ms: a holder aborts when `leaseTtlMs - fenceMarginMs` passed since
   * it last sent a renewal that succeeded (monotonic clock), so it stops before Redis could free the slot.
   * @defaultValue 200
   */
  readonly fenceMarginMs?: number;
  /**
   * How often a replica looks for dead replicas (liveness expired and no Redis connection left) and
   * frees their leases and waiting jobs, in ms.
   * @defaultValue 500
   */
  readonly sweepIntervalMs?: number;
  /**
   * How often a waiting origin checks its jobs' state, in ms: recovers a lost grant message, grants
   * held back by the restart barrier, and re-adds jobs lost with Redis state.
   * @defaultValue 500
   */
  readonly grantPollMs?: number;
  /**
   * Longest a lease is held, in ms, even if the caller never releases it (a safety net against a
   * leaked lease; must exceed the longest upstream stream). The call is aborted at this point.
   * @defaultValue 600000 (10 min)
   */
  readonly hardLeaseLimitMs?: number;
  /**
   * Longest a fenced lease stays held (and renewed) while its caller closes the upstream call, in ms,
   * counted from the fence: the caller releases it once the upstream has seen the close
   * (docs/architecture.md, "Fencing"); past this the holder releases it itself, with a warning (a
   * safety net against a caller that never releases). Above the longest `close_wait_ms` of an adapter
   * (60 s, README "Connections to an upstream").
   * @defaultValue 61000
   */
  readonly fencedCloseLimitMs?: number;
  /**
   * Longest an admission command may take before `acquireLease` answers `queue_unavailable`, in ms.
   * @defaultValue 1000
   */
  readonly commandTimeoutMs?: number;
  /**
   * After Redis lost its state (restart without persistence, failover), how long no slot is
   * granted so every live holder registers its running leases again, in ms; above `leaseTtlMs`.
   * @defaultValue leaseTtlMs + 500
   */
  readonly restartBarrierMs?: number;
  /**
   * Receives connection errors (once per outage), fenced and swept leases.
   * @defaultValue warnings and errors to the console, info dropped
   */
  readonly logger?: QueueLogger;
}

/** Options with every default applied. */
export type ResolvedRedisQueueOptions = Required<RedisProviderQueueOptions>;

/**
 * Applies the defaults of `RedisProviderQueueOptions` and checks every value.
 * @throws Error naming the option and the accepted range.
 */
export function resolveRedisQueueOptions(options: RedisProviderQueueOptions): ResolvedRedisQueueOptions {
  if (!options.redisUrl) throw new Error('RedisProviderQueue: redisUrl is required (e.g. redis://127.0.0.1:6379)');
  if (!options.prefix || options.prefix.endsWith(':')) {
    throw new Error('RedisProviderQueue: prefix must be a non-empty string without a trailing ":"');
  }
  const leaseTtlMs = options.leaseTtlMs ?? 2000;
  const resolved: ResolvedRedisQueueOptions = {
    redisUrl: options.redisUrl,
    prefix: options.prefix,
    cluster: options.cluster ?? false,
    replicaId: options.replicaId ?? randomUUID(),
    leaseTtlMs,
    renewIntervalMs: options.renewIntervalMs ?? Math.max(1, Math.floor(leaseTtlMs / 4)),
    fenceMarginMs: options.fenceMarginMs ?? Math.max(1, Math.floor(leaseTtlMs / 10)),
    sweepIntervalMs: options.sweepIntervalMs ?? 500,
    grantPollMs: options.grantPollMs ?? 500,
    hardLeaseLimitMs: options.hardLeaseLimitMs ?? 600_000,
    fencedCloseLimitMs: options.fencedCloseLimitMs ?? 61_000,
    commandTimeoutMs: options.commandTimeoutMs ?? 1000,
    restartBarrierMs: options.restartBarrierMs ?? leaseTtlMs + 500,
    logger: options.logger ?? consoleLibLogger,
  };
  if (!/^[A-Za-z0-9_-]+$/.test(resolved.replicaId)) {
    throw new Error('RedisProviderQueue: replicaId must be letters, digits, "_" or "-"');
  }
  const positive = [
    'leaseTtlMs',
    'renewIntervalMs',
    'fenceMarginMs',
    'sweepIntervalMs',
    'grantPollMs',
    'hardLeaseLimitMs',
    'fencedCloseLimitMs',
    'commandTimeoutMs',
    'restartBarrierMs',
  ] as const;
  for (const key of positive) {
    const value = resolved[key];
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      throw new Error(`RedisProviderQueue: ${key} must be a positive number of ms, got ${String(value)}`);
    }
  }
  if (resolved.renewIntervalMs * 3 > resolved.leaseTtlMs) {
    throw new Error(
      'RedisProviderQueue: renewIntervalMs must be at most leaseTtlMs / 3, or a short stall fences live leases',
    );
  }
  if (resolved.fenceMarginMs + resolved.renewIntervalMs >= resolved.leaseTtlMs) {
    throw new Error('RedisProviderQueue: fenceMarginMs + renewIntervalMs must stay below leaseTtlMs');
  }
  if (resolved.restartBarrierMs <= resolved.leaseTtlMs) {
    throw new Error(
      'RedisProviderQueue: restartBarrierMs must exceed leaseTtlMs, or a live holder cannot register again in time',
    );
  }
  return resolved;
}
