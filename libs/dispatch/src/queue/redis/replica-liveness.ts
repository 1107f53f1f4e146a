import type { QueueLogger } from './redis-queue-options';
import type { LeaseStore } from '../lease-store';

/**
 * One replica's side of "who is alive" (docs/architecture.md, "Dead replicas" and "Redis restarts"):
 * refreshes its liveness key, sweeps the leases and waiting jobs of replicas that died and the
 * expired leases nobody renews, and tells when Redis restarted (its `run_id` changed) so the caller raises the barrier.
 */
export class ReplicaLiveness {
  private runId: string | undefined;
  private clientListRefused = false;
  /** Per shard tag, `performance.now()` before which no lease there can be due for reaping. */
  private readonly reapDueAt = new Map<string, number>();
  /**
   * `performance.now()` when the renewal round of the last liveness refresh that succeeded started:
   * every lease this replica held then was renewed from that time on (undefined before the first).
   */
  private leasesRenewedAt: number | undefined;

  constructor(
    private readonly store: LeaseStore,
    private readonly replicaId: string,
    private readonly ttlMs: number,
    private readonly logger: QueueLogger,
    /** How long past its expiry an abandoned lease is reaped, in ms (`fenceMarginMs`). */
    private readonly reapGraceMs: number,
  ) {}

  /**
   * Marks this replica alive until the leases of the renewal round that just renewed every lease of
   * this replica expire: for `ttlMs` counted from `renewedFrom` (`performance.now()` when that round was
   * sent), so the liveness key never outlives them (docs/architecture.md, "Expired leases"). A round
   * that took past the fencing limit (`ttlMs - reapGraceMs`: the process stood still in it) refreshes
   * nothing.
   * @returns false when nothing was refreshed. @throws the Redis error.
   */
  async refresh(renewedFrom: number): Promise<boolean> {
    const leftMs = this.ttlMs - Math.ceil(performance.now() - renewedFrom);
    if (leftMs <= this.reapGraceMs) return false;
    await this.store.refreshLiveness(this.replicaId, leftMs);
    this.leasesRenewedAt = renewedFrom;
    return true;
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
   * One sweep round (docs/architecture.md, "Dead replicas" and "Expired leases"): frees the leases and
   * waiting jobs of replicas that died (liveness key expired AND no Redis connection left), and reaps
   * every lease expired more than `reapGraceMs` ago unless its replica is stalled (liveness expired,
   * connections open: a SIGSTOPped holder's upstream call still runs, so its slots stay taken until it
   * resumes and fences itself). Where `CLIENT LIST` is refused, liveness alone decides (no replica
   * counts as stalled). A tag is swept when a replica died or when its earliest lease can be due (the
   * script says when), so an idle replica does not sweep every round.
   * @param providersByTag every provider this replica knows, by shard tag.
   * @throws the Redis error (a `CLIENT LIST` that times out included); the caller retries next round.
   */
  async sweep(providersByTag: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const checkedAt = performance.now();
    const expired = await this.store.expiredReplicas(this.replicaId);
    const connected = expired.length > 0 ? await this.connectedReplicas() : new Set<string>();
    // This replica's own leases, while it has not renewed them within the fencing limit (it was stopped,
    // or its event loop stood still, and resumed): they may have expired in Redis, but their calls may
    // still be open at the upstream until the holder has fenced them and seen the close
    // (docs/architecture.md, "Fencing"), so this replica counts itself stalled until its renewal
    // round renewed them. Leases of an earlier process with the same id are reaped after that.
    const selfStalled =
      this.leasesRenewedAt === undefined || checkedAt - this.leasesRenewedAt > this.ttlMs - this.reapGraceMs;
    const replicas = {
      dead: expired.filter((id) => !connected.has(id)),
      stalled: [...expired.filter((id) => connected.has(id)), ...(selfStalled ? [this.replicaId] : [])],
    };
    let removed = 0;
    let reaped = 0;
    for (const [tag, ids] of providersByTag) {
      if (replicas.dead.length === 0 && performance.now() < (this.reapDueAt.get(tag) ?? 0)) continue;
      const sentAt = performance.now();
      // A replica alive at the check may have stalled since: only leases expired before the check are reaped.
      const graceMs = this.reapGraceMs + Math.ceil(sentAt - checkedAt);
      const swept = await this.store.sweep(tag, replicas, ids, graceMs);
      this.reapDueAt.set(tag, sentAt + swept.nextMs);
      removed += swept.removed;
      reaped += swept.reaped;
    }
    if (replicas.dead.length > 0) {
      await this.store.unregister(replicas.dead);
      this.logger.warn(
        { replicas: replicas.dead, freed: removed },
        `redis queue: replica(s) ${replicas.dead.join(', ')} died; freed ${removed} lease(s) and waiting job(s)`,
      );
    }
    if (reaped > 0) {
      this.logger.warn({ reaped }, `redis queue: freed ${reaped} expired lease(s) that no live replica renewed`);
    }
  }

  /** Replicas with a Redis connection left; none when `CLIENT LIST` is refused (said once). @throws any other Redis error. */
  private async connectedReplicas(): Promise<Set<string>> {
    try {
      return await this.store.connectedReplicas();
    } catch (e) {
      // Only a refusal (ACL, renamed command) means "never"; a timeout must not make a stalled replica look dead.
      if (!(e instanceof Error) || !/NOPERM|unknown command|no permissions/i.test(e.message)) throw e;
      if (!this.clientListRefused) {
        this.logger.warn(
          { err: e },
          "redis queue: CLIENT LIST refused; a stalled replica's slots are freed once its liveness expires",
        );
      }
      this.clientListRefused = true;
      return new Set();
    }
  }
}
