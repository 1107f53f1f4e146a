import { randomUUID } from 'node:crypto';

/** Where the BullMQ backend reports what it cannot throw (connection errors, lost leases). */
export interface QueueLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** Options of `BullmqProviderQueue` (DESIGN §4 lease protocol and its measured hazards). */
export interface BullmqProviderQueueOptions {
  /** Redis to use, e.g. `redis://127.0.0.1:6379` (`queue.redis_url`). */
  readonly redisUrl: string;
  /** Key prefix shared by every replica of one deployment (`queue.prefix`); no `:` at the end. */
  readonly prefix: string;
  /**
   * This replica's id in grants and liveness keys; unique per process.
   * @defaultValue a random UUID
   */
  readonly replicaId?: string;
  /**
   * BullMQ job lock of a held lease, in ms: a holder killed with SIGKILL loses its leases to
   * another replica after at most `lockDurationMs + stalledIntervalMs` (hazard: 30 s defaults took 42–55 s).
   * @defaultValue 5000
   */
  readonly lockDurationMs?: number;
  /**
   * How often workers look for jobs whose holder died, in ms.
   * @defaultValue 2500
   */
  readonly stalledIntervalMs?: number;
  /**
   * Holder deaths a lease survives. Leases are idempotent (a re-grant is ignored by the origin), so
   * this is large: BullMQ's default 1 failed the job on the 2nd death and freed a slot still in use.
   * @defaultValue 1_000_000
   */
  readonly maxStalledCount?: number;
  /**
   * Lifetime of a replica's liveness key, in ms: a holder frees the lease of an origin whose key
   * expired, so an origin killed with SIGKILL frees its leases after about this long (invariant 3: ≤ 15 s).
   * @defaultValue 10000
   */
  readonly originTtlMs?: number;
  /**
   * How often an origin refreshes its liveness key, in ms; less than `originTtlMs / 2`.
   * @defaultValue originTtlMs / 4
   */
  readonly originRefreshMs?: number;
  /**
   * Longest a lease is held after its last possible grant, in ms, even if the origin never releases
   * (a safety net against a lost release; must exceed the longest upstream stream).
   * @defaultValue 600000 (10 min)
   */
  readonly hardLeaseLimitMs?: number;
  /**
   * How often a waiting origin checks its jobs' state, in ms: recovers lost grants (active = granted),
   * re-adds jobs lost with Redis state, and moves requests to a sibling with a free slot.
   * @defaultValue 200
   */
  readonly grantPollMs?: number;
  /**
   * How often a holder re-checks release keys, origin liveness and the hard limit, in ms (a lost
   * release message is recovered within this time).
   * @defaultValue 1000
   */
  readonly holderPollMs?: number;
  /**
   * Longest an admission command may take before `acquireLease` answers `queue_unavailable`, in ms
   * (invariant 5: "at once").
   * @defaultValue 1000
   */
  readonly commandTimeoutMs?: number;
  /**
   * After a Redis restart that lost state, how long new admissions wait so every replica can
   * re-register its running leases first, in ms (invariant 7).
   * @defaultValue 3000
   */
  readonly restartBarrierMs?: number;
  /**
   * Run a worker on every provider queue (hold leases for every replica). `false` admits and counts
   * only, e.g. for the status exporter or tests; at least one replica must run workers.
   * @defaultValue true
   */
  readonly runWorkers?: boolean;
  /**
   * Receives connection errors (once per outage), lost or hard-limited leases.
   * @defaultValue warnings and errors to the console, info dropped
   */
  readonly logger?: QueueLogger;
}

/** Options with every default applied. */
export type ResolvedBullmqOptions = Required<BullmqProviderQueueOptions>;

const consoleLogger: QueueLogger = {
  info: () => undefined,
  warn: (m) => console.warn(m),
  error: (m) => console.error(m),
};

/**
 * Applies the defaults of `BullmqProviderQueueOptions` and checks every value.
 * @throws Error naming the option and the accepted range.
 */
export function resolveBullmqOptions(options: BullmqProviderQueueOptions): ResolvedBullmqOptions {
  if (!options.redisUrl) throw new Error('BullmqProviderQueue: redisUrl is required (e.g. redis://127.0.0.1:6379)');
  if (!options.prefix || options.prefix.endsWith(':')) {
    throw new Error('BullmqProviderQueue: prefix must be a non-empty string without a trailing ":"');
  }
  const originTtlMs = options.originTtlMs ?? 10_000;
  const resolved: ResolvedBullmqOptions = {
    redisUrl: options.redisUrl,
    prefix: options.prefix,
    replicaId: options.replicaId ?? randomUUID(),
    lockDurationMs: options.lockDurationMs ?? 5000,
    stalledIntervalMs: options.stalledIntervalMs ?? 2500,
    maxStalledCount: options.maxStalledCount ?? 1_000_000,
    originTtlMs,
    originRefreshMs: options.originRefreshMs ?? Math.max(1, Math.floor(originTtlMs / 4)),
    hardLeaseLimitMs: options.hardLeaseLimitMs ?? 600_000,
    grantPollMs: options.grantPollMs ?? 200,
    holderPollMs: options.holderPollMs ?? 1000,
    commandTimeoutMs: options.commandTimeoutMs ?? 1000,
    restartBarrierMs: options.restartBarrierMs ?? 3000,
    runWorkers: options.runWorkers ?? true,
    logger: options.logger ?? consoleLogger,
  };
  if (/[\s:]/.test(resolved.replicaId) || resolved.replicaId === '') {
    throw new Error('BullmqProviderQueue: replicaId must be non-empty, without spaces or ":"');
  }
  const positive: (keyof ResolvedBullmqOptions)[] = [
    'lockDurationMs',
    'stalledIntervalMs',
    'originTtlMs',
    'originRefreshMs',
    'hardLeaseLimitMs',
    'grantPollMs',
    'holderPollMs',
    'commandTimeoutMs',
    'restartBarrierMs',
  ];
  for (const key of positive) {
    const value = resolved[key];
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      throw new Error(`BullmqProviderQueue: ${key} must be a positive number of ms, got ${String(value)}`);
    }
  }
  if (!Number.isInteger(resolved.maxStalledCount) || resolved.maxStalledCount < 1) {
    throw new Error('BullmqProviderQueue: maxStalledCount must be an integer ≥ 1');
  }
  if (resolved.originRefreshMs * 2 > resolved.originTtlMs) {
    throw new Error('BullmqProviderQueue: originRefreshMs must be at most originTtlMs / 2, or live origins look dead');
  }
  if (resolved.stalledIntervalMs > resolved.lockDurationMs) {
    throw new Error('BullmqProviderQueue: stalledIntervalMs must not exceed lockDurationMs');
  }
  return resolved;
}
