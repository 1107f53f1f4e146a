import type { LeaseStore } from '../lease-store';
import type { LeaseHolder } from './lease-holder';
import type { ProviderSlots } from './provider-slots';
import type { QueueLogger } from './redis-queue-options';
import type { ReplicaLiveness } from './replica-liveness';

/** The parts of one replica's queue that a restart recovery reads and drives. */
export interface RestartRecoveryParts {
  readonly store: LeaseStore;
  readonly liveness: ReplicaLiveness;
  readonly holder: LeaseHolder;
  readonly slots: ProviderSlots;
  /** How long no slot is granted after Redis lost its state, in ms (`restartBarrierMs`). */
  readonly restartBarrierMs: number;
  readonly logger: QueueLogger;
  /** Refreshes liveness and renews every held lease; behind the barrier a renewal registers a missing lease again. */
  readonly renewAll: () => Promise<void>;
}

/**
 * Keeps the limit when Redis loses its state (docs/architecture.md, "Redis restarts"): detects a
 * restart or failover by the server's `run_id`, or by limits gone missing while leases are held, raises
 * the barrier so no slot is granted before every live holder registered its running leases again,
 * writes the limits again and registers this replica's leases.
 */
export class RestartRecovery {
  constructor(private readonly parts: RestartRecoveryParts) {}

  /**
   * Runs on every (re)connect before admissions resume: on a changed `run_id` (a restart, or a
   * failover to another primary: docs/architecture.md, "Failover") raises the barrier on
   * every shard tag, then writes every limit and renews (re-registers) this replica's leases.
   * @throws the Redis error; the connection watch logs it and the next reconnect runs it again.
   */
  async onReconnect(): Promise<void> {
    const { liveness, slots, store, restartBarrierMs, logger } = this.parts;
    if (await liveness.restarted()) {
      logger.warn(
        { barrier_ms: restartBarrierMs },
        `redis queue: Redis restarted (or failed over: its run_id changed); no grants for ${restartBarrierMs} ms while running leases register again`,
      );
      for (const tag of slots.byTag().keys()) await store.raiseBarrier(tag, restartBarrierMs);
    }
    await this.writeLimits();
    await this.parts.renewAll();
  }

  /**
   * Writes every provider's limits (one script per shard tag). Where Redis had none, the script raises
   * the barrier before it grants anything, for as long as Redis has not been up `restartBarrierMs` yet
   * (holders that ran before Redis came back register again or fence themselves within that time; a
   * new deployment on a long-running Redis waits for nothing), and for the whole `restartBarrierMs`
   * where this replica holds leases (Redis lost its state): then its leases are registered again at once.
   * @throws the Redis error.
   */
  async writeLimits(): Promise<void> {
    const { slots, holder, store, restartBarrierMs, logger } = this.parts;
    let lostState = false;
    const freshForMs = Math.max(0, restartBarrierMs - (await store.serverUptimeMs()));
    for (const tag of slots.byTag().keys()) {
      const limits = slots.limitsOn(tag);
      if (limits.length === 0) continue;
      const holding = holder.holdsOn(tag);
      const missing = await store.configure(tag, limits, holding ? restartBarrierMs : freshForMs, slots.clients);
      if (missing && holding) lostState = true;
    }
    if (lostState) {
      logger.warn(
        {},
        'redis queue: Redis lost the limits while leases were held; registering them again behind the barrier',
      );
      await this.parts.renewAll();
    }
  }
}
