import { leaseLost } from '../admission-errors';
import type { QueueLogger } from './redis-queue-options';
import { isSolo, type HeldLeaseFacts, type JobClient, type LeaseStore, type StoredProvider } from '../lease-store';
import type { ServiceRate } from '../service-rate';
import type { Lease } from '../provider-queue';
import type { HeldTokens } from '../token-limit';
import type { BudgetStanding, UsedTokens } from '../token-budget';

/** A lease this replica holds for one of its requests. */
interface HeldLease {
  readonly jobId: string;
  readonly provider: StoredProvider;
  /** Its client in its pool: renewals name it, so a lease registered again counts for its client. */
  readonly owner: JobClient;
  /** The tokens it holds on a provider with a token limit (docs/architecture.md, "Token limits"), if any. */
  readonly tokens?: HeldTokens;
  /**
   * Its job had a token weight or its client a token budget: its release reads the hash and gives back
   * the tokens Redis says it holds, and settles its budget reservation.
   */
  readonly weighted: boolean;
  /** `performance.now()` when the last renewal that succeeded was sent (fencing runs on this monotonic clock). */
  renewedAt: number;
  readonly grantedAt: number;
  readonly controller: AbortController;
  /**
   * `performance.now()` when it was fenced (its call aborted), or undefined. A fenced lease stays
   * held and renewed until its caller releases it, once the upstream has seen the close
   * (docs/architecture.md, "Fencing").
   */
  fencedAt?: number;
  released: boolean;
}

/** Timing of the holder side, in ms (see `RedisProviderQueueOptions`). */
export interface LeaseHolderTiming {
  readonly leaseTtlMs: number;
  readonly fenceMarginMs: number;
  readonly hardLeaseLimitMs: number;
  readonly fencedCloseLimitMs: number;
}

/**
 * The leases one replica holds (docs/architecture.md, "Lease protocol" and "Fencing"): hands them
 * out as `Lease` objects, renews them (one script per shard tag), aborts the ones it could not renew
 * in time, and keeps the jobs whose last command got no answer (leftovers) until Redis answers again,
 * then settles each one wherever it landed (docs/architecture.md, "Leftovers").
 */
export class LeaseHolder {
  private readonly leases = new Map<string, HeldLease>();
  /** Jobs whose last command got no answer, with every candidate of their admission: settled by `settleLeftovers`. */
  private readonly leftovers = new Map<string, { shardTag: string; providerIds: string[] }>();

  constructor(
    private readonly store: LeaseStore,
    private readonly timing: LeaseHolderTiming,
    private readonly logger: QueueLogger,
    /** Where the time each lease was held is recorded, for the Retry-After of `queue_full`. */
    private readonly rate: ServiceRate,
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
   * or confirmed it was sent (`performance.now()`); `startedAt` when the request arrived (epoch ms);
   * `owner` its client in its pool; `tokens` what it holds of a token limit (`weighted`: its job had a
   * token weight, whether or not the granting provider has a limit); `times.budget` the client's
   * tightest token budget window after the request's reservation (docs/architecture.md, "Token
   * budgets"), for a client with a budget.
   */
  hold(
    jobId: string,
    provider: StoredProvider,
    times: { readonly renewedAt: number; readonly startedAt: number; readonly budget?: BudgetStanding },
    owner: JobClient,
    tokens: { readonly held?: HeldTokens; readonly weighted: boolean } = { weighted: false },
  ): Lease {
    const controller = new AbortController();
    const grantedAt = performance.now();
    const { renewedAt } = times;
    const held: HeldLease = {
      jobId,
      provider,
      owner,
      ...(tokens.held ? { tokens: { ...tokens.held } } : {}),
      weighted: tokens.weighted || times.budget !== undefined,
      renewedAt,
      grantedAt,
      controller,
      released: false,
    };
    this.leases.set(jobId, held);
    return {
      providerId: provider.providerId,
      queueWaitMs: Date.now() - times.startedAt,
      signal: controller.signal,
      ...(times.budget ? { budget: times.budget } : {}),
      prefillDone: () => this.prefillDone(held),
      // A fenced lease is charged its reservation as it stood (README "Token budgets"): its `used` is not
      // read. The caller releases it once the upstream has seen the close (docs/architecture.md, "Fencing").
      release: async (used?: UsedTokens) => {
        if (held.released) return;
        held.released = true;
        this.leases.delete(jobId);
        this.rate.record(owner.pool, performance.now() - grantedAt);
        const counted = used && held.fencedAt === undefined ? { used: used.tokens } : {};
        await this.release(jobId, provider, { ...this.facts(held), ...counted });
      },
    };
  }

  /**
   * Gives the prompt part of a lease's tokens back (`LeaseStore.prefill`), once. Never throws: a
   * command that fails leaves the tokens held until the release, which gives back what Redis holds.
   */
  private async prefillDone(held: HeldLease): Promise<void> {
    if (held.released || !held.tokens || held.tokens.prompt === 0) return;
    held.tokens.prompt = 0;
    await this.store.prefill(held.provider, held.jobId).catch(() => undefined);
  }

  /** What the store is told of a lease this holder ends. */
  private facts(held: HeldLease): HeldLeaseFacts {
    return { solo: isSolo(held.owner.client), confirmed: true, tokened: held.weighted };
  }

  /**
   * Ends a lease in Redis; without an answer it becomes a leftover, settled once Redis answers. `held`
   * says what is known of a lease this holder held (`LeaseStore.release`): of the fleet's only client
   * (no count to read or end), confirmed (no unconfirmed-grant entry); none for a lease it never took.
   */
  async release(jobId: string, provider: StoredProvider, held: HeldLeaseFacts = {}): Promise<void> {
    try {
      await this.store.release(provider, jobId, held);
      this.leftovers.delete(jobId);
    } catch {
      this.settleLater(jobId, [provider]);
    }
  }

  /**
   * A job whose command got no answer (admit, confirm, leave or release timed out or lost its
   * connection: the script may have run or not): once Redis answers, `settleLeftovers` takes it out
   * wherever it landed among `candidates` (all of one shard tag), waiting or granted.
   */
  settleLater(jobId: string, candidates: readonly StoredProvider[]): void {
    if (candidates.length === 0) return;
    const providerIds = [...new Set(candidates.map((c) => c.providerId))];
    this.leftovers.set(jobId, { shardTag: candidates[0].shardTag, providerIds });
  }

  /** Settles every leftover, one script each (`LeaseStore.settle`). @throws the Redis error; the rest wait for the next round. */
  async settleLeftovers(): Promise<void> {
    for (const [jobId, { shardTag, providerIds }] of [...this.leftovers]) {
      await this.store.settle(shardTag, providerIds, jobId);
      this.leftovers.delete(jobId);
    }
  }

  /**
   * Renews every held lease (one script per shard tag): a lease Redis no longer has is fenced.
   * @throws the Redis error; the caller retries next round.
   */
  async renew(): Promise<void> {
    const byTag = new Map<string, HeldLease[]>();
    for (const lease of this.leases.values()) {
      // Appended in place: a copy per lease made each round cost O(leases²) with many streams held.
      const list = byTag.get(lease.provider.shardTag);
      if (list) list.push(lease);
      else byTag.set(lease.provider.shardTag, [lease]);
    }
    for (const [tag, list] of byTag) {
      const sentAt = performance.now();
      const lost = new Set(
        await this.store.renew(
          tag,
          list.map((l) => ({
            providerId: l.provider.providerId,
            jobId: l.jobId,
            owner: l.owner,
            ...(l.tokens ? { tokens: l.tokens } : {}),
          })),
          false,
        ),
      );
      for (const lease of list) {
        if (lease.released) continue;
        if (lost.has(lease.jobId)) this.fence(lease, 'Redis no longer has it', true);
        else lease.renewedAt = sentAt;
      }
    }
  }

  /**
   * Fencing: a lease whose last successful renewal was sent more than `leaseTtlMs - fenceMarginMs`
   * ago may be freed by Redis at any moment, so its upstream call is aborted now; so is a lease
   * held past `hardLeaseLimitMs`. A fenced lease its caller has not released within
   * `fencedCloseLimitMs` of its fence is released here (docs/architecture.md, "Fencing").
   */
  fenceOverdue(): void {
    const now = performance.now();
    const limit = this.timing.leaseTtlMs - this.timing.fenceMarginMs;
    for (const lease of [...this.leases.values()]) {
      if (lease.fencedAt !== undefined) {
        if (now - lease.fencedAt > this.timing.fencedCloseLimitMs) this.giveUp(lease);
      } else if (now - lease.renewedAt > limit)
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
      out.push(this.store.release(lease.provider, lease.jobId, this.facts(lease)));
    }
    this.leases.clear();
    for (const [jobId, { shardTag, providerIds }] of this.leftovers)
      out.push(this.store.settle(shardTag, providerIds, jobId));
    return out;
  }

  /** Forgets every lease without telling Redis (a simulated crash). */
  abandon(): void {
    for (const lease of this.leases.values()) lease.released = true;
    this.leases.clear();
  }

  /**
   * Aborts the upstream call of a lease this holder can no longer prove (docs/architecture.md,
   * "Fencing"). `gone`: Redis no longer has the lease, so there is nothing to keep: it is forgotten
   * and released at once. Otherwise the lease stays held, and renewed with the others, until its
   * caller releases it once the upstream has seen the close of the aborted call (`closeUnfinishedAnswer`
   * in the gateway): a slot freed here, while the aborted call's connection is still open at the
   * upstream, would let the next caller's request reach it first (README "Production layout": the
   * limit holds at the upstream "including while a replica is stalled or stopped").
   */
  private fence(lease: HeldLease, reason: string, gone = false): void {
    if (lease.released || (lease.fencedAt !== undefined && !gone)) return;
    if (lease.fencedAt === undefined) {
      this.logger.warn(
        { job_id: lease.jobId, provider: lease.provider.providerId, reason },
        `redis queue: lease ${lease.jobId} of provider "${lease.provider.providerId}" lost (${reason}); aborting its upstream call`,
      );
    }
    lease.fencedAt ??= performance.now();
    lease.controller.abort(leaseLost(lease.provider.providerId));
    if (!gone) return;
    lease.released = true;
    this.leases.delete(lease.jobId);
    void this.release(lease.jobId, lease.provider, this.facts(lease));
  }

  /** A fenced lease its caller did not release within `fencedCloseLimitMs`: released here, with a warning. */
  private giveUp(lease: HeldLease): void {
    lease.released = true;
    this.leases.delete(lease.jobId);
    this.logger.warn(
      { job_id: lease.jobId, provider: lease.provider.providerId },
      `redis queue: fenced lease ${lease.jobId} of provider "${lease.provider.providerId}" not released by its caller within ${this.timing.fencedCloseLimitMs} ms; released`,
    );
    void this.release(lease.jobId, lease.provider, this.facts(lease));
  }
}
