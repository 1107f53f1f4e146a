import { WaitingError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { BullmqKeys, GrantMessage, LeaseJobData } from './bullmq-keys';
import type { QueueLogger } from './bullmq-options';

/**
 * Why a holder stops holding a job:
 * - `released`: the origin released the lease (release key or message) → the job completes, the slot frees;
 * - `origin-dead`: the origin's liveness key expired (outside a grace period) → completes;
 * - `hard-limit`: `hardLeaseLimitMs` passed → completes, with a warning;
 * - `vanished`: the job no longer exists in Redis (lost with Redis state; the origin re-registers it);
 * - `handoff`: this replica closes → the job goes back to the head of wait for another replica;
 * - `abandon`: test hook for a crash → nothing is written, the lock expires.
 */
export type HoldOutcome = 'released' | 'origin-dead' | 'hard-limit' | 'vanished' | 'handoff' | 'abandon';

interface HeldJob {
  readonly jobId: string;
  readonly providerId: string;
  readonly origin: string;
  readonly hardLimitAt: number;
  finished: boolean;
  finish(outcome: HoldOutcome): void;
}

/** What a `LeaseHolder` needs from its replica. */
export interface LeaseHolderDeps {
  /** Fail-fast connection for checks and grant messages. */
  readonly client: Redis;
  readonly keys: BullmqKeys;
  readonly logger: QueueLogger;
  /** True while a missing liveness key must not free a lease (just after a reconnect or a Redis restart). */
  originGraceActive(): boolean;
}

/**
 * The worker side of the lease protocol (DESIGN §4): the BullMQ processor of every provider queue.
 * It announces the grant to the origin over pub/sub, then keeps the job active — and so counted in
 * `in_flight` — until the origin releases it, the origin's liveness key expires, or the hard limit passes.
 * A re-run of the same job after a holder death is simply another grant: the origin ignores it.
 */
export class LeaseHolder {
  private readonly held = new Map<string, HeldJob>();

  constructor(private readonly deps: LeaseHolderDeps) {}

  /** Number of jobs this replica holds active right now. */
  get size(): number {
    return this.held.size;
  }

  /** True when this replica holds the job. */
  holds(jobId: string): boolean {
    return this.held.has(jobId);
  }

  /** The BullMQ processor: resolves when the lease ends; never throws except to hand the job off. */
  async hold(job: Job<LeaseJobData>, token: string | undefined): Promise<void> {
    const jobId = job.id;
    if (!jobId) return;
    const data = job.data;
    let resolveOutcome!: (outcome: HoldOutcome) => void;
    const outcome = new Promise<HoldOutcome>((resolve) => (resolveOutcome = resolve));
    const entry: HeldJob = {
      jobId,
      providerId: data.providerId,
      origin: data.origin,
      hardLimitAt: data.hardLimitAt,
      finished: false,
      finish: (reason) => {
        if (entry.finished) return;
        entry.finished = true;
        resolveOutcome(reason);
      },
    };
    this.held.set(jobId, entry);
    try {
      void this.announce(entry);
      const reason = await outcome;
      if (reason === 'hard-limit') {
        this.deps.logger.warn(`lease ${jobId} on provider "${entry.providerId}" reached the hard lease limit and was freed`);
      } else if (reason === 'origin-dead') {
        this.deps.logger.info(`lease ${jobId} on provider "${entry.providerId}" freed: origin ${entry.origin} is gone`);
      }
      if (reason === 'handoff') {
        // Back to the head of wait (RPUSH) in one script, so no other job can take the slot first.
        await job.moveToWait(token);
        throw new WaitingError();
      }
    } finally {
      this.held.delete(jobId);
    }
  }

  /** Ends the hold of `jobId` if this replica has it (a release message, or a local release). */
  finish(jobId: string, outcome: HoldOutcome): void {
    this.held.get(jobId)?.finish(outcome);
  }

  /** Ends every hold: `handoff` on close, `abandon` for a simulated crash. */
  finishAll(outcome: HoldOutcome): void {
    for (const entry of this.held.values()) entry.finish(outcome);
  }

  /**
   * Re-checks every held job in one round trip: release key (a lost release message), job still
   * present, origin liveness, hard limit. Connection errors skip the round; holding is the safe default.
   */
  async poll(): Promise<void> {
    const entries = [...this.held.values()].filter((e) => !e.finished);
    if (entries.length === 0) return;
    const now = Date.now();
    const { client, keys } = this.deps;
    const origins = [...new Set(entries.map((e) => e.origin))];
    const pipeline = client.pipeline();
    for (const e of entries) {
      pipeline.exists(keys.releaseKey(e.jobId));
      pipeline.exists(keys.queueKey(e.providerId, e.jobId));
    }
    for (const origin of origins) pipeline.exists(keys.originKey(origin));
    let reply: [Error | null, unknown][] | null;
    try {
      reply = await pipeline.exec();
    } catch {
      return;
    }
    if (!reply || reply.some(([error]) => error)) return;
    const results = reply.map(([, value]) => value);
    const alive = new Map(origins.map((o, i) => [o, results[entries.length * 2 + i] === 1]));
    const grace = this.deps.originGraceActive();
    entries.forEach((e, i) => {
      if (results[2 * i] === 1) e.finish('released');
      else if (results[2 * i + 1] === 0) e.finish('vanished');
      else if (!alive.get(e.origin) && !grace) e.finish('origin-dead');
      else if (now > e.hardLimitAt) e.finish('hard-limit');
    });
  }

  /** Tells the origin it holds the lease, and checks in the same round trip that it still wants it. */
  private async announce(entry: HeldJob): Promise<void> {
    const { client, keys } = this.deps;
    const message: GrantMessage = { jobId: entry.jobId, providerId: entry.providerId };
    try {
      const results = await client
        .pipeline()
        .exists(keys.releaseKey(entry.jobId))
        .exists(keys.originKey(entry.origin))
        .publish(keys.grantChannel(entry.origin), JSON.stringify(message))
        .exec();
      if (!results || results.some(([error]) => error)) return;
      if (results[0][1] === 1) entry.finish('released');
      else if (results[1][1] === 0 && !this.deps.originGraceActive()) entry.finish('origin-dead');
    } catch {
      // Redis unreachable: keep holding; the origin recovers the grant by job state, `poll` re-checks.
    }
  }
}
