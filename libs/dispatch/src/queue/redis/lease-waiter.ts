import type { AdmissionError } from '../admission-error';
import { queueUnavailable } from '../admission-errors';
import type { StoredProvider } from '../lease-store';
import type { Lease, LeaseRequest } from '../provider-queue';
import type { BudgetStanding } from '../token-budget';

/** Why a waiter leaves its queue before a grant. */
export type LeaveReason = 'deadline' | 'abort' | 'outage';

/** Where a waiter reports its end, and how it leaves at its deadline or on abort. */
export interface LeaseWaiterHooks {
  /** The `acquireLease` promise's own resolve and reject. */
  resolve(lease: Lease): void;
  reject(error: AdmissionError): void;
  /** Runs once, when the waiter is granted or failed, before its promise settles. */
  settled(waiter: LeaseWaiter): void;
  /** The step run at `maxWaitMs` (`deadline`) or when the request's signal aborts (`abort`). */
  leave(waiter: LeaseWaiter, why: 'deadline' | 'abort'): Promise<void>;
}

/**
 * One request of this replica waiting for a grant (docs/architecture.md, "Lease protocol"). Its steps
 * (admit, confirm, leave, move, queue again) run one at a time: each is chained on the promise of the
 * step before, so a grant message, a poll result and the deadline never interleave, and nothing
 * re-checks on a timer. It settles once: granted (`grant`) or failed (`fail`).
 */
export class LeaseWaiter {
  /** When the request arrived (epoch ms): the lease's `queueWaitMs` counts from here. */
  readonly startedAt = Date.now();
  /** Its job in Redis; empty until the first admission script is sent. */
  jobId = '';
  /** Every candidate its job's admission was sent with (one shard tag): where the job may have landed. */
  candidates: readonly StoredProvider[] = [];
  /** Its client's tightest token budget window after its reservation at admission (a client with a budget). */
  standing: BudgetStanding | undefined;
  private done = false;
  /** Steps scheduled and not finished yet. */
  private pending = 0;
  /** The last step scheduled: the next one starts when it ends. */
  private chain: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;
  private readonly onAbort = () => this.step(() => this.hooks.leave(this, 'abort'));

  /** Starts the `maxWaitMs` clock and listens to the request's signal. */
  constructor(
    readonly request: LeaseRequest,
    /** The provider its job is queued on (or will be: the first usable candidate). */
    public provider: StoredProvider,
    private readonly hooks: LeaseWaiterHooks,
  ) {
    this.timer = setTimeout(() => this.step(() => hooks.leave(this, 'deadline')), request.maxWaitMs);
    request.signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  /** True once granted or failed. */
  get settled(): boolean {
    return this.done;
  }

  /** True while it has a job in Redis and no step pending: a poll or an outage may act on it. */
  get idle(): boolean {
    return !this.done && this.pending === 0 && this.jobId !== '';
  }

  /**
   * Schedules one step after the steps scheduled before it (at once when none is pending). A step is
   * skipped once the waiter settled, or when `forJob` is given and the waiter has moved to another job
   * since. A step that throws fails the waiter with `queue_unavailable`.
   */
  step(fn: () => Promise<void>, forJob?: string): void {
    const run = async (): Promise<void> => {
      if (this.done || (forJob !== undefined && forJob !== this.jobId)) return;
      try {
        await fn();
      } catch (e) {
        this.fail(queueUnavailable(e));
      }
    };
    this.pending++;
    const started = this.pending === 1 ? run() : this.chain.then(run);
    this.chain = started.finally(() => {
      this.pending--;
    });
  }

  /** Hands over the lease `take` makes; nothing (and `take` is not called) once settled. */
  grant(take: () => Lease): void {
    if (!this.end()) return;
    this.hooks.resolve(take());
  }

  /** Fails the request with `error`; nothing once settled. */
  fail(error: AdmissionError): void {
    if (!this.end()) return;
    this.hooks.reject(error);
  }

  private end(): boolean {
    if (this.done) return false;
    this.done = true;
    clearTimeout(this.timer);
    this.request.signal?.removeEventListener('abort', this.onAbort);
    this.hooks.settled(this);
    return true;
  }
}
