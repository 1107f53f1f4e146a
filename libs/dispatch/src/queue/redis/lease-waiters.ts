import type { AdmissionError } from '../admission-error';
import {
  clientAborted,
  noAvailableProvider,
  queueClosing,
  queueFullFor,
  queueTimeout,
  queueUnavailable,
  redisSilent,
  type FullCause,
} from '../admission-errors';
import { clientOf } from '../fair-order';
import { DEFAULT_SHARD_TAG } from '../lease-keys';
import { SHED_MESSAGE_SUFFIX, type JobClient, type LeaseStore } from '../lease-store';
import { DEFAULT_POOL, type Lease, type LeaseRequest } from '../provider-queue';
import { isAnswerError, replyText } from '../redis-connection';
import type { ServiceRate } from '../service-rate';
import { tokensOn, weightOf } from './lease-tokens';
import { budgetRefusal, budgetWeightOf } from './lease-budget';
import type { ConnectionWatch } from './connection-watch';
import type { QueueLogger } from './redis-queue-options';
import type { LeaseHolder } from './lease-holder';
import { LeaseWaiter, type LeaveReason } from './lease-waiter';
import type { ProviderSlot, ProviderSlots } from './provider-slots';

/** The parts of one replica's queue its waiters use. */
export interface LeaseWaitersParts {
  readonly store: LeaseStore;
  readonly holder: LeaseHolder;
  readonly slots: ProviderSlots;
  readonly watch: ConnectionWatch;
  /** This replica's id: the prefix of its job ids, and the origin in each job's data. */
  readonly replicaId: string;
  /** Writes every limit again; run once when admission finds a candidate Redis has no limits for. */
  readonly writeLimits: () => Promise<void>;
  /** True once the queue closed or crashed. */
  readonly isClosed: () => boolean;
  /** The pools' recent lease times: the Retry-After of `queue_full`. */
  readonly rate: ServiceRate;
  /** Where an admission script that failed in Redis is said, at error (a broken key or a bug, not an outage). */
  readonly logger: QueueLogger;
}

/**
 * The requests this replica (their origin) waits on (docs/architecture.md, "Lease protocol"): admits
 * each one with one script, confirms a grant that arrives by message or poll, leaves the queue at the
 * deadline, on abort or in an outage (a grant that raced the leave is used or released, never leaked),
 * and moves a waiter off a provider the config removed. The steps of one waiter run one at a time
 * (`LeaseWaiter.step`).
 */
export class LeaseWaiters {
  /** Waiters by their current job id. */
  private readonly waiters = new Map<string, LeaseWaiter>();
  /**
   * The number of this replica's last job id. Starts at the process's start time in µs, so a replica
   * id used again by a later process (a restart under a fixed id) never repeats a job id that may still
   * be in Redis.
   */
  private jobSeq = Date.now() * 1000;

  constructor(private readonly parts: LeaseWaitersParts) {}

  /**
   * Queues one request on `usable` (its configured candidates, at least one; the first one's shard tag
   * is the one admitted on) and resolves its lease once granted.
   * @throws AdmissionError `queue_full`, `queue_timeout`, `queue_unavailable`, `no_available_provider`, `client_aborted`.
   */
  admit(request: LeaseRequest, usable: readonly ProviderSlot[]): Promise<Lease> {
    return new Promise<Lease>((resolve, reject) => {
      const waiter = new LeaseWaiter(request, usable[0], {
        resolve,
        reject,
        settled: (w) => this.waiters.delete(w.jobId),
        leave: (w, why) => this.leave(w, why),
      });
      waiter.step(() => this.enqueue(waiter, usable, true));
    });
  }

  /**
   * A message on this replica's grant channel: a grant (`jobId|queueName`) to confirm, or give back when
   * nobody waits for it; or `jobId|!shed`, a waiting job evicted for a higher band.
   */
  onGrantMessage(payload: string): void {
    const sep = payload.lastIndexOf('|');
    const jobId = payload.slice(0, sep);
    const waiter = this.waiters.get(jobId);
    if (payload.slice(sep + 1) === SHED_MESSAGE_SUFFIX) {
      if (waiter) waiter.step(async () => waiter.fail(this.full(waiter, 'shed')), jobId);
      return;
    }
    const providerId = this.parts.store.keys.providerOf(payload.slice(sep + 1));
    if (waiter) {
      waiter.step(() => this.confirm(waiter, providerId), jobId);
    } else if (!this.parts.holder.knows(jobId) && !this.parts.isClosed()) {
      // A grant nobody waits for any more (the waiter settled on a Redis error): give the slot back,
      // and its budget reservation whole (nothing was used).
      void this.parts.holder.release(jobId, this.parts.slots.at(providerId, DEFAULT_SHARD_TAG), { used: 0 });
    }
  }

  /**
   * After a `configure`: every waiter whose job lists a provider not in `kept` (its own queue's, or
   * one whose `wanted` set holds it) moves to its remaining candidates, so the removed provider's
   * freed slots grant it nothing (README "Config refresh").
   */
  moveOffRemoved(kept: ReadonlySet<string>): void {
    for (const waiter of [...this.waiters.values()]) {
      if (waiter.candidates.some((c) => !kept.has(c.providerId)) || !kept.has(waiter.provider.providerId))
        waiter.step(() => this.moveOff(waiter));
    }
  }

  /**
   * Recovery, not the hot path (runs every `grantPollMs`): asks Redis for the state of every idle
   * waiter's job (one script per shard tag), confirms a grant whose message was lost and queues again
   * a job lost with Redis state. @throws the Redis error; the next poll tries again.
   */
  async poll(): Promise<void> {
    const byTag = new Map<string, LeaseWaiter[]>();
    for (const waiter of this.idle()) {
      const list = byTag.get(waiter.provider.shardTag) ?? [];
      list.push(waiter);
      byTag.set(waiter.provider.shardTag, list);
    }
    for (const [tag, list] of byTag) {
      const jobs = list.map((w) => ({ providerId: w.provider.providerId, jobId: w.jobId }));
      const states = await this.parts.store.poll(tag, jobs);
      list.forEach((waiter, i) => {
        const state = states[i];
        const { jobId } = jobs[i];
        if (state.kind === 'granted') waiter.step(() => this.confirm(waiter, state.providerId), jobId);
        if (state.kind === 'shed') waiter.step(async () => waiter.fail(this.full(waiter, 'shed')), jobId);
        // Lost with Redis state: queue it again.
        if (state.kind === 'gone') waiter.step(() => this.requeue(waiter), jobId);
      });
    }
  }

  /** Every idle waiter leaves its queue (`why`: Redis stayed silent too long, see `ConnectionWatch.silentTooLong`). */
  leaveAll(why: 'outage'): void {
    for (const waiter of this.idle()) waiter.step(() => this.leave(waiter, why));
  }

  /** Fails every waiter with `error` at once, telling Redis nothing (a simulated crash). */
  failAll(error: AdmissionError): void {
    for (const waiter of [...this.waiters.values()]) waiter.fail(error);
  }

  /**
   * Shutdown: fails every waiter with `queue_unavailable` and takes its job out of Redis wherever it
   * is (released, if it was granted meanwhile). Returns one promise per job; each rejects with the Redis error.
   */
  closeAll(): Promise<unknown>[] {
    const { store } = this.parts;
    const leaving: Promise<unknown>[] = [];
    for (const waiter of [...this.waiters.values()]) {
      const { jobId, candidates } = waiter;
      waiter.fail(queueClosing());
      if (jobId === '' || candidates.length === 0) continue;
      leaving.push(
        store.settle(
          candidates[0].shardTag,
          candidates.map((c) => c.providerId),
          jobId,
        ),
      );
    }
    return leaving;
  }

  /** One admission script for a waiter; a grant resolves it, a place in line leaves it to grants and polls. */
  private async enqueue(waiter: LeaseWaiter, usable: readonly ProviderSlot[], mayRewrite: boolean): Promise<void> {
    const { store, holder, slots, replicaId } = this.parts;
    const tag = usable[0].shardTag;
    const candidates = usable.filter((p) => p.shardTag === tag);
    const jobId = `${replicaId}.${++this.jobSeq}`;
    waiter.jobId = jobId;
    waiter.candidates = candidates;
    // Registered before the script runs: a grant message can arrive before its reply.
    this.waiters.set(jobId, waiter);
    const sentAt = performance.now();
    const owner = this.ownerOf(waiter);
    // Job data names the origin, the model and the client id: never a prompt or a key.
    const data = JSON.stringify({ origin: replicaId, model: waiter.request.modelGroupKey, client: owner.client.id });
    const budget = budgetWeightOf(waiter.request, owner.client);
    let result;
    try {
      const ids = candidates.map((p) => p.providerId);
      result = await store.admit(tag, ids, jobId, data, owner, weightOf(waiter.request, this.parts.slots), budget);
    } catch (e) {
      // The script may have run (queued or granted on any candidate): settle that job once Redis answers.
      holder.settleLater(jobId, candidates);
      // Redis answered that the script itself failed (a key of the wrong type, a bug): no outage, so
      // nothing else says it; the request's own log line is at info.
      if (isAnswerError(e) && / script: /.test(e.message)) {
        this.parts.logger.error({ err: replyText(e), jobId }, 'redis queue: the admission script failed in Redis');
      }
      waiter.fail(queueUnavailable(e));
      return;
    }
    if (result.kind === 'unconfigured' && mayRewrite) {
      this.waiters.delete(jobId);
      await this.parts.writeLimits().catch(() => undefined);
      return this.enqueue(waiter, usable, false);
    }
    if (result.kind === 'full') return waiter.fail(this.full(waiter, 'queues_full', result.queued));
    if (result.kind === 'client_full') return waiter.fail(this.full(waiter, 'client_queued', result.queued));
    if (result.kind === 'budget' || result.kind === 'budget_never')
      return waiter.fail(budgetRefusal(result, owner.client.id, budget));
    // Still unconfigured after the limits were written again: nothing can take the request.
    if (result.kind === 'unconfigured') return waiter.fail(this.full(waiter, 'queues_full'));
    const provider = (waiter.provider = slots.at(result.providerId, tag));
    waiter.standing = result.standing;
    const times = { renewedAt: sentAt, startedAt: waiter.startedAt, budget: result.standing };
    if (result.kind === 'granted')
      waiter.grant(() =>
        holder.hold(jobId, provider, times, owner, tokensOn(waiter.request, this.parts.slots, provider.providerId)),
      );
  }

  /** A grant for a queued waiter (message or poll): confirm it in Redis, then hand the lease over. */
  private async confirm(waiter: LeaseWaiter, providerId: string): Promise<void> {
    const { store, holder, slots } = this.parts;
    const { jobId } = waiter;
    const provider = slots.at(providerId, waiter.provider.shardTag);
    if (slots.usable([providerId]).length === 0) {
      // Granted on a provider this replica's config removed (a release raced the reload): the slot goes
      // back, and the waiter queues again on its remaining candidates (README "Config refresh").
      await holder.release(jobId, provider, { used: 0 });
      return this.requeue(waiter);
    }
    const sentAt = performance.now();
    const tokens = tokensOn(waiter.request, this.parts.slots, providerId);
    const renewed = { providerId, jobId, owner: this.ownerOf(waiter), ...(tokens.held ? { tokens: tokens.held } : {}) };
    let lost;
    try {
      lost = await store.renew(provider.shardTag, [renewed], true);
    } catch (e) {
      // The confirmation may have run: nobody will renew that lease, so it is settled once Redis answers.
      holder.settleLater(jobId, waiter.candidates);
      waiter.fail(queueUnavailable(e));
      return;
    }
    if (lost.includes(jobId)) {
      waiter.fail(queueUnavailable('the granted lease was lost in Redis'));
      return;
    }
    const times = { renewedAt: sentAt, startedAt: waiter.startedAt, budget: waiter.standing };
    waiter.grant(() => holder.hold(jobId, provider, times, this.ownerOf(waiter), tokens));
  }

  /** Deadline, abort or outage: the job leaves its queue; a grant that raced it is used (deadline) or released. */
  private async leave(waiter: LeaseWaiter, why: LeaveReason): Promise<void> {
    const { store, holder, slots, watch } = this.parts;
    const model = waiter.request.modelGroupKey;
    const silentMs = Math.round(watch.silentMs());
    const error =
      why === 'abort'
        ? clientAborted()
        : why === 'outage'
          ? redisSilent(silentMs, watch.refusing())
          : queueTimeout(model, waiter.request.maxWaitMs);
    // An outage or a client gone does not wait for Redis: the request fails now, its job leaves after.
    if (why !== 'deadline') waiter.fail(error);
    let outcome;
    try {
      outcome = await store.leave(waiter.provider, waiter.jobId);
    } catch {
      holder.settleLater(waiter.jobId, waiter.candidates);
      outcome = { kind: 'left' as const };
    }
    if (outcome.kind === 'granted') {
      // A grant that raced the deadline is used, unless a reload removed its provider (then it times out).
      if (why === 'deadline' && slots.usable([outcome.providerId]).length > 0)
        return this.confirm(waiter, outcome.providerId);
      await holder.release(waiter.jobId, slots.at(outcome.providerId, waiter.provider.shardTag), { used: 0 });
    }
    waiter.fail(outcome.kind === 'shed' ? this.full(waiter, 'shed') : error);
  }

  /** The waiter's provider was removed from the config: queue it again on its remaining candidates. */
  private async moveOff(waiter: LeaseWaiter): Promise<void> {
    const outcome = await this.parts.store.leave(waiter.provider, waiter.jobId).catch(() => {
      this.parts.holder.settleLater(waiter.jobId, waiter.candidates);
      return { kind: 'gone' as const };
    });
    if (outcome.kind === 'granted') return this.confirm(waiter, outcome.providerId);
    await this.requeue(waiter);
  }

  /** Queues a waiter whose job is out of Redis again on its usable candidates, or fails it with `no_available_provider`. */
  private async requeue(waiter: LeaseWaiter): Promise<void> {
    this.waiters.delete(waiter.jobId);
    const usable = this.parts.slots.usable(waiter.request.candidates.map((c) => c.providerId));
    if (usable.length === 0) return waiter.fail(noAvailableProvider(waiter.request.modelGroupKey));
    await this.enqueue(waiter, usable, true);
  }

  /** The waiter's client in its candidates' pool (docs/architecture.md, "Clients, priority and fair share"). */
  private ownerOf(waiter: LeaseWaiter): JobClient {
    const first = this.parts.slots.usable(waiter.request.candidates.map((c) => c.providerId))[0];
    return { pool: first?.limits.pool ?? DEFAULT_POOL, client: clientOf(waiter.request) };
  }

  /** `queue_full` for the waiter by its cause (`queueFullFor`), with `queued` waiters ahead. */
  private full(waiter: LeaseWaiter, cause: FullCause, queued = 0) {
    const { pool, client } = this.ownerOf(waiter);
    const { modelGroupKey: model, candidates } = waiter.request;
    return queueFullFor(cause, { model, client, candidates }, pool, this.parts.rate, queued);
  }

  /** Waiters with a job in Redis and no step pending. */
  private idle(): LeaseWaiter[] {
    return [...this.waiters.values()].filter((w) => w.idle);
  }
}
