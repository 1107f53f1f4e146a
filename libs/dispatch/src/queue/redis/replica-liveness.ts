import type { QueueLogger } from './redis-queue-options';
import type { LeaseStore } from '../lease-store';

/**
 * One replica's side of "who is alive" (docs/architecture.md, "Dead replicas" and "Redis restarts"):
 * refreshes its liveness key, sweeps the leases and waiting jobs of replicas that died, and tells
 * when Redis restarted (its `run_id` changed) so the caller raises the barrier.
 */
export class ReplicaLiveness {
  private runId: string | undefined;
  private clientListRefused = false;

  constructor(
    private readonly store: LeaseStore,
    private readonly replicaId: string,
    private readonly ttlMs: number,
    private readonly logger: QueueLogger,
  ) {}

  /** Marks this replica alive for `ttlMs`. @throws the Redis error. */
  refresh(): Promise<void> {
    return this.store.refreshLiveness(this.replicaId, this.ttlMs);
  }

  /**
   * True when the server's `run_id` differs from the one seen at the last check (a restart or a
   * failover: state may be lost); false on the first check. @throws the Redis error.
   */
  async restarted(): Promise<boolean> {
    const runId = await this.store.serverRunId();
    const restarted = this.runId !== undefined && runId !== this.runId;
    this.runId = runId;
    return restarted;
  }

  /**
   * Frees the leases and waiting jobs of replicas that died: liveness key expired AND no Redis
   * connection left. A stalled replica keeps its connections, so its slots stay taken until it
   * resumes and fences itself; where `CLIENT LIST` is refused, liveness alone decides.
   * @param providersByTag every provider this replica knows, by shard tag.
   * @throws the Redis error; the caller retries next round.
   */
  async sweep(providersByTag: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const expired = await this.store.expiredReplicas(this.replicaId);
    if (expired.length === 0) return;
    let connected = new Set<string>();
    try {
      connected = await this.store.connectedReplicas();
    } catch (e) {
      if (!this.clientListRefused) {
        this.logger.warn(
          { err: e },
          "redis queue: CLIENT LIST refused; a stalled replica's slots are freed once its liveness expires",
        );
      }
      this.clientListRefused = true;
    }
    const dead = expired.filter((id) => !connected.has(id));
    if (dead.length === 0) return;
    let removed = 0;
    for (const [tag, ids] of providersByTag) removed += await this.store.sweep(tag, dead, ids);
    await this.store.unregister(dead);
    this.logger.warn(
      { replicas: dead, freed: removed },
      `redis queue: replica(s) ${dead.join(', ')} died; freed ${removed} lease(s) and waiting job(s)`,
    );
  }
}
