import { AdmissionError } from '../admission-error';
import type { QueueLogger } from './redis-queue-options';
import type { LeaseStore, StoredProvider } from '../lease-store';
import type { Lease } from '../provider-queue';

/** A lease this replica holds for one of its requests. */
interface HeldLease {
  readonly jobId: string;
  readonly provider: StoredProvider;
  /** `performance.now()` when the last renewal that succeeded was sent (fencing runs on this monotonic clock). */
  renewedAt: number;
  readonly grantedAt: number;
  readonly controller: AbortController;
  released: boolean;
}

/** Timing of the holder side, in ms (see `RedisProviderQueueOptions`). */
export interface LeaseHolderTiming {
  readonly leaseTtlMs: number;
  readonly fenceMarginMs: number;
  readonly hardLeaseLimitMs: number;
}

/**
 * The leases one replica holds (docs/architecture.md, "Lease protocol" and "Fencing"): hands them
 * out as `Lease` objects, renews them (one script per shard tag), aborts the ones it could not renew
 * in time, and keeps jobs whose release or removal could not reach Redis until it answers again.
 */
export class LeaseHolder {
  private readonly leases = new Map<string, HeldLease>();
  /** Jobs whose leave or release could not reach Redis: retried by `renew`. */
  private readonly leftovers = new Map<string, { provider: StoredProvider; action: 'leave' | 'release' }>();

  constructor(
    private readonly store: LeaseStore,
    private readonly timing: LeaseHolderTiming,
    private readonly logger: QueueLogger,
  ) {}

  /** Leases held right now. */
  get size(): number {
    return this.leases.size;
  }

  /** True when `jobId` is a lease held here or a job waiting for its cleanup. */
  knows(jobId: string): boolean {
    return this.leases.has(jobId) || this.leftovers.has(jobId);
  }

  /** True when some lease is held on a provider of `shardTag`. */
  holdsOn(shardTag: string): boolean {
    return [...this.leases.values()].some((l) => l.provider.shardTag === shardTag);
  }

  /**
   * A granted job becomes a `Lease` for the caller. `renewedAt` is when the command that granted
   * or confirmed it was sent (`performance.now()`); `startedAt` when the request arrived (epoch ms).
   */
  hold(jobId: string, provider: StoredProvider, renewedAt: number, startedAt: number): Lease {
    const controller = new AbortController();
    const held: HeldLease = { jobId, provider, renewedAt, grantedAt: performance.now(), controller, released: false };
    this.leases.set(jobId, held);
    return {
      providerId: provider.providerId,
      queueWaitMs: Date.now() - startedAt,
      signal: controller.signal,
      release: async () => {
        if (held.released) return;
        held.released = true;
        this.leases.delete(jobId);
        await this.release(jobId, provider);
      },
    };
  }

  /** Ends a lease in Redis; on failure it is kept (never renewed, so never lost) and released once Redis answers. */
  async release(jobId: string, provider: StoredProvider): Promise<void> {
    try {
      await this.store.release(provider, jobId);
      this.leftovers.delete(jobId);
    } catch {
      this.leftovers.set(jobId, { provider, action: 'release' });
    }
  }

  /** A waiting job whose removal failed: removed (or its lease released, if granted meanwhile) once Redis answers. */
  leaveLater(jobId: string, provider: StoredProvider): void {
    this.leftovers.set(jobId, { provider, action: 'leave' });
  }

  /**
   * Renews every held lease (one script per shard tag): a lease Redis no longer has is fenced.
   * Then retries leftovers. @throws the Redis error; the caller retries next round.
   */
  async renew(): Promise<void> {
    const byTag = new Map<string, HeldLease[]>();
    for (const lease of this.leases.values())
      byTag.set(lease.provider.shardTag, [...(byTag.get(lease.provider.shardTag) ?? []), lease]);
    for (const [tag, list] of byTag) {
      const sentAt = performance.now();
      const lost = new Set(
        await this.store.renew(
          tag,
          list.map((l) => ({ providerId: l.provider.providerId, jobId: l.jobId })),
          false,
        ),
      );
      for (const lease of list) {
        if (lease.released) continue;
        if (lost.has(lease.jobId)) this.fence(lease, 'Redis no longer has it');
        else lease.renewedAt = sentAt;
      }
    }
    for (const [jobId, { provider, action }] of [...this.leftovers]) {
      if (action === 'leave') {
        const outcome = await this.store.leave(provider, jobId);
        if (outcome.kind === 'granted')
          await this.store.release({ ...provider, providerId: outcome.providerId }, jobId);
      } else {
        await this.store.release(provider, jobId);
      }
      this.leftovers.delete(jobId);
    }
  }

  /**
   * Fencing: a lease whose last successful renewal was sent more than `leaseTtlMs - fenceMarginMs`
   * ago may be freed by Redis at any moment, so its upstream call is aborted now; so is a lease
   * held past `hardLeaseLimitMs`.
   */
  fenceOverdue(): void {
    const now = performance.now();
    const limit = this.timing.leaseTtlMs - this.timing.fenceMarginMs;
    for (const lease of [...this.leases.values()]) {
      if (now - lease.renewedAt > limit)
        this.fence(lease, `not renewed for ${Math.round(now - lease.renewedAt)} ms (limit ${limit} ms)`);
      else if (now - lease.grantedAt > this.timing.hardLeaseLimitMs)
        this.fence(lease, `held longer than the hard lease limit of ${this.timing.hardLeaseLimitMs} ms`);
    }
  }

  /** Releases every held lease and leftover (shutdown); resolves when each attempt settled. */
  releaseAll(): Promise<unknown>[] {
    const out: Promise<unknown>[] = [];
    for (const lease of this.leases.values()) {
      lease.released = true;
      out.push(this.store.release(lease.provider, lease.jobId));
    }
    this.leases.clear();
    for (const [jobId, { provider }] of this.leftovers)
      out.push(this.store.leave(provider, jobId).then(() => this.store.release(provider, jobId)));
    return out;
  }

  /** Forgets every lease without telling Redis (a simulated crash). */
  abandon(): void {
    for (const lease of this.leases.values()) lease.released = true;
    this.leases.clear();
  }

  private fence(lease: HeldLease, reason: string): void {
    if (lease.released) return;
    lease.released = true;
    this.leases.delete(lease.jobId);
    this.logger.warn(
      { job_id: lease.jobId, provider: lease.provider.providerId, reason },
      `redis queue: lease ${lease.jobId} of provider "${lease.provider.providerId}" lost (${reason}); aborting its upstream call`,
    );
    lease.controller.abort(
      new AdmissionError(
        'queue_unavailable',
        `The lease on provider "${lease.provider.providerId}" could not be renewed; the request was stopped to keep the provider's limit.`,
        1,
      ),
    );
    void this.release(lease.jobId, lease.provider);
  }
}
