import { Queue, Worker, type Job } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import { AdmissionError } from './admission-error';
import { BullmqKeys, type GrantMessage, type LeaseJobData } from './bullmq-keys';
import { resolveBullmqOptions, type BullmqProviderQueueOptions, type ResolvedBullmqOptions } from './bullmq-options';
import { LeaseHolder } from './lease-holder';
import {
  chooseProvider,
  type Lease,
  type LeaseRequest,
  type ProviderCounts,
  type ProviderQueue,
  type QueueProvider,
} from './provider-queue';

/** Jobs a worker may fetch at once; the queue's global concurrency is the only real limit. */
const WORKER_CONCURRENCY = 10_000;
/** How long a release key outlives its job's last possible re-run, in ms (a re-grant of an unknown job is released again anyway). */
const RELEASE_KEY_TTL_MS = 60_000;

/** One provider queue of this replica: the BullMQ Queue (producer side) and Worker (holder side). */
interface ProviderSlot {
  limits: QueueProvider;
  readonly queue: Queue<LeaseJobData>;
  readonly worker: Worker<LeaseJobData> | undefined;
  /** Left out of the last `configure`: takes no new requests; keeps its queue and worker for running leases. */
  removed: boolean;
}

/** A request of this replica waiting for a grant (origin side). */
interface Waiter {
  readonly request: LeaseRequest;
  readonly candidateIds: readonly string[];
  readonly startedAt: number;
  readonly hardLimitAt: number;
  providerId: string;
  /** The job in Redis; undefined while it is being (re-)added or was lost with Redis state. */
  jobId: string | undefined;
  settled: boolean;
  /** A remove/add for this waiter is in flight: a grant message waits for its result. */
  busy: boolean;
  pendingGrant: string | undefined;
  chain: Promise<void>;
  resolve(lease: Lease): void;
  reject(error: AdmissionError): void;
  cleanup(): void;
}

/** A lease of this replica in use by its caller (origin side). */
interface HeldLease {
  jobId: string;
  readonly providerId: string;
  readonly hardLimitAt: number;
  released: boolean;
}

/**
 * `ProviderQueue` over BullMQ and Redis, exact across gateway replicas (DESIGN §4 `bullmq` backend).
 *
 * One BullMQ queue per provider with `setGlobalConcurrency(max_concurrency)`: `active` is the
 * provider's in_flight, `wait + prioritized` its queued. The origin replica adds a job; whichever
 * replica's worker activates it holds it (`LeaseHolder`) and publishes a grant; the origin calls the
 * upstream itself and releases with a release key + message. Key layout: `BullmqKeys`.
 *
 * Safety rules, each from a hazard measured in DESIGN §4: a lost grant is recovered by job state
 * (lock present = granted); a deadline or abort first removes the job and uses or releases it if the
 * removal finds it already granted; `maxStalledCount` is large (re-grants are idempotent); the global
 * concurrency is written again before every add and after every reconnect; after a Redis restart
 * that lost state, running leases are re-added behind a barrier key before new admissions.
 */
export class BullmqProviderQueue implements ProviderQueue {
  readonly backend = 'bullmq' as const;
  /** Key and channel layout of this deployment (for the exporter and tests). */
  readonly keys: BullmqKeys;
  /** This replica's id in grants and liveness keys. */
  readonly replicaId: string;

  private readonly opts: ResolvedBullmqOptions;
  /** Fail-fast connection (no offline queue) for queues, admission, counts, liveness and publishing. */
  private readonly producer: Redis;
  /** Shared by every worker for non-blocking commands; BullMQ duplicates it for each blocking connection. */
  private readonly workerConnection: Redis | undefined;
  private readonly subscriber: Redis;
  private readonly holder: LeaseHolder;
  private readonly providers = new Map<string, ProviderSlot>();
  private readonly waiters = new Set<Waiter>();
  private readonly waiterByJob = new Map<string, Waiter>();
  private readonly leaseByJob = new Map<string, HeldLease>();
  /** Jobs to remove (or release if granted) once Redis answers: leftovers of failed removals. */
  private readonly orphans = new Map<string, string>();
  /** Releases that could not reach Redis yet: jobId → providerId. */
  private readonly pendingReleases = new Map<string, string>();
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly freedChecks = new Set<string>();
  private connectionCheck: Promise<void> = Promise.resolve();
  /** Resolves after the first connection's checks (start-up); admissions before it wait up to `commandTimeoutMs`. */
  private readonly firstConnection: Promise<void>;
  private markFirstConnection!: () => void;
  private runId: string | undefined;
  private graceUntil = 0;
  private outage = false;
  private closed = false;
  private closing: Promise<void> | undefined;
  private jobSeq = 0;
  private polling = false;
  private holderPolling = false;

  /** @throws Error when an option is out of range (see `BullmqProviderQueueOptions`). */
  constructor(options: BullmqProviderQueueOptions) {
    this.opts = resolveBullmqOptions(options);
    this.replicaId = this.opts.replicaId;
    this.keys = new BullmqKeys(this.opts.prefix);
    const base: RedisOptions = { retryStrategy: (times) => Math.min(times * 100, 1000) };
    this.producer = new Redis(this.opts.redisUrl, {
      ...base,
      connectionName: `${this.opts.prefix}:origin:${this.replicaId}`,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: this.opts.commandTimeoutMs,
    });
    this.subscriber = new Redis(this.opts.redisUrl, { ...base, maxRetriesPerRequest: null });
    this.workerConnection = this.opts.runWorkers
      ? new Redis(this.opts.redisUrl, { ...base, maxRetriesPerRequest: null })
      : undefined;
    this.producer.on('error', (e: Error) => this.onRedisError('producer', e));
    this.subscriber.on('error', (e: Error) => this.onRedisError('subscriber', e));
    this.workerConnection?.on('error', (e: Error) => this.onRedisError('worker', e));
    this.firstConnection = new Promise<void>((resolve) => (this.markFirstConnection = resolve));
    this.producer.on('ready', () => {
      this.connectionCheck = this.onProducerReady()
        .catch((e: unknown) => this.opts.logger.warn(`bullmq queue: reconnect check failed: ${message(e)}`))
        .finally(() => this.markFirstConnection());
    });
    this.producer.on('close', () => this.markOutage('connection closed'));
    this.holder = new LeaseHolder({
      client: this.producer,
      keys: this.keys,
      logger: this.opts.logger,
      originGraceActive: () => Date.now() < this.graceUntil,
    });
    this.subscriber.on('message', (channel: string, payload: string) => this.onMessage(channel, payload));
    this.subscriber
      .subscribe(this.keys.grantChannel(this.replicaId), this.keys.releaseChannel, this.keys.freedChannel)
      .catch((e: unknown) => this.opts.logger.warn(`bullmq queue: subscribe failed: ${message(e)}`));
    this.timers.push(
      setInterval(() => void this.refreshLiveness().catch(() => undefined), this.opts.originRefreshMs),
      setInterval(() => void this.pollWaiters(), this.opts.grantPollMs),
      setInterval(() => void this.pollHolder(), this.opts.holderPollMs),
    );
  }

  async configure(providers: readonly QueueProvider[]): Promise<void> {
    if (this.closed) throw new AdmissionError('queue_unavailable', 'The queue is shutting down.', 1);
    await withTimeout(this.firstConnection, this.opts.commandTimeoutMs).catch(() => undefined);
    const keep = new Set(providers.map((p) => p.providerId));
    const raised: ProviderSlot[] = [];
    for (const limits of providers) {
      if (!Number.isInteger(limits.maxConcurrency) || limits.maxConcurrency < 1) {
        throw new Error(`provider "${limits.providerId}": max_concurrency must be an integer ≥ 1`);
      }
      const slot = this.providers.get(limits.providerId);
      if (slot) {
        if (limits.maxConcurrency > slot.limits.maxConcurrency || slot.removed) raised.push(slot);
        slot.limits = limits;
        slot.removed = false;
      } else {
        this.providers.set(limits.providerId, this.createSlot(limits));
      }
    }
    try {
      await this.applyLimits();
      // A raised limit adds no marker: wake blocked workers or a waiting job idles until drainDelay.
      await Promise.all(raised.map((slot) => slot.queue.resume()));
    } catch (e) {
      this.opts.logger.warn(`bullmq queue: limits not written (re-applied on reconnect): ${message(e)}`);
    }
    for (const [id, slot] of this.providers) {
      if (keep.has(id) || slot.removed) continue;
      slot.removed = true;
      for (const waiter of this.waiters) {
        if (waiter.providerId === id && !waiter.settled) this.runOp(waiter, () => this.moveOffRemoved(waiter));
      }
    }
  }

  acquireLease(request: LeaseRequest): Promise<Lease> {
    return this.admit(request);
  }

  async counts(providerIds?: readonly string[]): Promise<Map<string, ProviderCounts>> {
    const ids = providerIds ?? [...this.providers].filter(([, s]) => !s.removed).map(([id]) => id);
    try {
      return await this.readCounts(ids, false);
    } catch (e) {
      throw unavailable(e);
    }
  }

  /** Leases this replica's workers hold right now, for any origin (holder side; 0 with `runWorkers: false`). */
  get heldLeaseCount(): number {
    return this.holder.size;
  }

  /** True when Redis answers PING within `commandTimeoutMs` (feeds `/readyz`). */
  async isReady(): Promise<boolean> {
    if (this.closed || !this.connected()) return false;
    try {
      return (await this.producer.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  private connected(): boolean {
    return this.producer.status === 'ready';
  }

  /**
   * Fails this replica's waiting requests (removing their jobs), releases its leases, hands the leases
   * it holds for other replicas back to the head of their queues, and closes workers, queues,
   * connections and timers. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  /**
   * Test hook that behaves like SIGKILL as far as Redis can tell: drops every connection and timer
   * without removing, releasing or handing off anything, so locks and the liveness key expire on
   * their own. Pending `acquireLease` calls reject with `queue_unavailable`.
   */
  async simulateCrash(): Promise<void> {
    this.closed = true;
    this.closing ??= (async () => {
      for (const timer of this.timers) clearInterval(timer);
      this.producer.disconnect();
      this.subscriber.disconnect();
      this.workerConnection?.disconnect();
      await Promise.all([...this.providers.values()].map((s) => s.worker?.close(true).catch(() => undefined)));
      this.holder.finishAll('abandon');
      await Promise.all([...this.providers.values()].map((s) => s.queue.close().catch(() => undefined)));
      for (const waiter of [...this.waiters]) this.settleReject(waiter, shutdownError());
      for (const lease of this.leaseByJob.values()) lease.released = true;
      this.leaseByJob.clear();
    })();
    return this.closing;
  }

  // ---- admission (origin side) ----

  private async admit(request: LeaseRequest): Promise<Lease> {
    if (this.closed) throw shutdownError();
    if (request.signal?.aborted) throw abortedError();
    const usable = this.usable(request.candidates.map((c) => c.providerId));
    if (usable.length === 0) throw noProviderError(request.modelGroupKey);
    if (!this.connected()) {
      await withTimeout(this.firstConnection, this.opts.commandTimeoutMs).catch(() => undefined);
      if (!this.connected()) throw unavailable('Redis is not connected');
    }
    let counts: Map<string, ProviderCounts>;
    let barrier: boolean;
    try {
      await withTimeout(this.connectionCheck, this.opts.commandTimeoutMs);
      [counts, barrier] = await this.readCountsAndBarrier(usable.map((p) => p.providerId));
    } catch (e) {
      throw unavailable(e);
    }
    const best = chooseProvider(usable, counts);
    const bestCounts = best && counts.get(best.providerId);
    let target: QueueProvider | undefined;
    if (best && bestCounts && bestCounts.inFlight < best.maxConcurrency) {
      target = best;
    } else {
      target = chooseProvider(
        usable.filter((p) => (counts.get(p.providerId)?.queued ?? 0) < p.maxQueued),
        counts,
      );
    }
    if (!target) {
      throw new AdmissionError('queue_full', `Every provider of model "${request.modelGroupKey}" has a full queue.`, 1);
    }
    const chosen = target;
    const startedAt = Date.now();
    return new Promise<Lease>((resolve, reject) => {
      const onAbort = () => this.runOp(waiter, () => this.leaveOnAbort(waiter));
      const timer = setTimeout(() => this.runOp(waiter, () => this.leaveOnDeadline(waiter)), request.maxWaitMs);
      const waiter: Waiter = {
        request,
        candidateIds: request.candidates.map((c) => c.providerId),
        startedAt,
        hardLimitAt: startedAt + request.maxWaitMs + this.opts.grantPollMs + this.opts.hardLeaseLimitMs,
        providerId: chosen.providerId,
        jobId: undefined,
        settled: false,
        busy: false,
        pendingGrant: undefined,
        chain: Promise.resolve(),
        resolve,
        reject,
        cleanup: () => {
          clearTimeout(timer);
          request.signal?.removeEventListener('abort', onAbort);
        },
      };
      request.signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.add(waiter);
      if (barrier) return; // re-added by the poll once running leases are registered again
      this.runOp(waiter, async () => {
        try {
          await this.addJob(waiter, chosen.providerId, true);
        } catch (e) {
          this.settleReject(waiter, unavailable(e));
        }
      });
    });
  }

  /** Adds the waiter's job; the id is registered first, since the grant can arrive before the add's reply. */
  private async addJob(waiter: Waiter, providerId: string, limitWritten: boolean): Promise<void> {
    const slot = this.providers.get(providerId);
    if (!slot) throw new Error(`unknown provider "${providerId}"`);
    const jobId = this.nextJobId();
    waiter.providerId = providerId;
    waiter.jobId = jobId;
    this.waiterByJob.set(jobId, waiter);
    try {
      if (!limitWritten) {
        await this.producer.hset(this.keys.queueKey(providerId, 'meta'), 'concurrency', slot.limits.maxConcurrency);
      }
      await slot.queue.add('lease', { origin: this.replicaId, providerId, hardLimitAt: waiter.hardLimitAt }, { jobId });
    } catch (e) {
      // The add may have reached Redis: remove it later, or release it if it gets granted.
      this.waiterByJob.delete(jobId);
      waiter.jobId = undefined;
      this.orphans.set(jobId, providerId);
      throw e;
    }
  }

  /**
   * Runs one remove/add step for a waiter, one at a time. A grant message that arrives meanwhile
   * is applied afterwards only if the step left the waiter on that same job (a removed job's grant is stale).
   */
  private runOp(waiter: Waiter, op: () => Promise<void>): void {
    waiter.chain = waiter.chain.then(async () => {
      if (waiter.settled) return;
      waiter.busy = true;
      try {
        await op();
      } catch (e) {
        this.opts.logger.warn(`bullmq queue: waiting request step failed: ${message(e)}`);
      } finally {
        waiter.busy = false;
        const pending = waiter.pendingGrant;
        waiter.pendingGrant = undefined;
        if (!waiter.settled && pending !== undefined && pending === waiter.jobId) this.settleGrant(waiter, pending);
      }
    });
  }

  /** Deadline: remove the job; if the removal finds it already granted, the lease is used (DESIGN §4 hazard). */
  private async leaveOnDeadline(waiter: Waiter): Promise<void> {
    const timeout = new AdmissionError(
      'queue_timeout',
      `No provider of model "${waiter.request.modelGroupKey}" freed a slot within ${waiter.request.maxWaitMs} ms.`,
      1,
    );
    const jobId = waiter.jobId;
    if (jobId === undefined) return this.settleReject(waiter, timeout);
    let removed: boolean;
    try {
      removed = await this.removeJob(waiter.providerId, jobId);
    } catch (e) {
      this.orphans.set(jobId, waiter.providerId);
      return this.settleReject(waiter, unavailable(e));
    }
    if (removed) this.settleReject(waiter, timeout);
    else this.settleGrant(waiter, jobId);
  }

  /** Client abort: remove the job; if it was granted meanwhile, release that lease properly. */
  private async leaveOnAbort(waiter: Waiter): Promise<void> {
    const jobId = waiter.jobId;
    const providerId = waiter.providerId;
    this.settleReject(waiter, abortedError());
    if (jobId === undefined) return;
    try {
      if (!(await this.removeJob(providerId, jobId))) await this.releaseJob(jobId, providerId);
    } catch {
      this.orphans.set(jobId, providerId);
    }
  }

  /** Work conservation: leave the current queue for `target`, unless the job was granted meanwhile. */
  private async moveTo(waiter: Waiter, target: string): Promise<void> {
    const jobId = waiter.jobId;
    if (jobId === undefined || waiter.providerId === target) return;
    if (!(await this.removeJob(waiter.providerId, jobId))) return this.settleGrant(waiter, jobId);
    this.waiterByJob.delete(jobId);
    waiter.jobId = undefined;
    await this.addJob(waiter, target, false); // on failure the poll re-adds it
  }

  /** The waiter's provider left the configuration: move to the least-loaded usable candidate, or fail. */
  private async moveOffRemoved(waiter: Waiter): Promise<void> {
    const usable = this.usable(waiter.candidateIds);
    const jobId = waiter.jobId;
    if (jobId !== undefined) {
      if (!(await this.removeJob(waiter.providerId, jobId))) return this.settleGrant(waiter, jobId);
      this.waiterByJob.delete(jobId);
      waiter.jobId = undefined;
    }
    if (usable.length === 0) return this.settleReject(waiter, noProviderError(waiter.request.modelGroupKey));
    const counts = await this.readCounts(usable.map((p) => p.providerId), false);
    const target = chooseProvider(usable, counts) ?? usable[0];
    await this.addJob(waiter, target.providerId, false);
  }

  /** Re-adds a job lost with Redis state or a failed add, on its provider or the best usable candidate. */
  private async readd(waiter: Waiter, counts: Map<string, ProviderCounts>): Promise<void> {
    if (waiter.jobId !== undefined) return;
    const usable = this.usable(waiter.candidateIds);
    if (usable.length === 0) return this.settleReject(waiter, noProviderError(waiter.request.modelGroupKey));
    const target = usable.some((p) => p.providerId === waiter.providerId)
      ? waiter.providerId
      : (chooseProvider(usable, counts) ?? usable[0]).providerId;
    await this.addJob(waiter, target, false);
  }

  private settleGrant(waiter: Waiter, jobId: string): void {
    if (waiter.settled) return;
    waiter.settled = true;
    waiter.cleanup();
    this.waiters.delete(waiter);
    this.waiterByJob.delete(jobId);
    const held: HeldLease = { jobId, providerId: waiter.providerId, hardLimitAt: waiter.hardLimitAt, released: false };
    this.leaseByJob.set(jobId, held);
    waiter.resolve({
      providerId: waiter.providerId,
      queueWaitMs: Date.now() - waiter.startedAt,
      release: async () => {
        if (held.released) return;
        held.released = true;
        this.leaseByJob.delete(held.jobId);
        await this.releaseJob(held.jobId, held.providerId);
      },
    });
  }

  private settleReject(waiter: Waiter, error: AdmissionError): void {
    if (waiter.settled) return;
    waiter.settled = true;
    waiter.cleanup();
    this.waiters.delete(waiter);
    if (waiter.jobId !== undefined) this.waiterByJob.delete(waiter.jobId);
    waiter.reject(error);
  }

  /** Removes a job that is not active; false when it is locked, i.e. granted. */
  private async removeJob(providerId: string, jobId: string): Promise<boolean> {
    const slot = this.providers.get(providerId);
    if (!slot) return true;
    return (await slot.queue.remove(jobId)) === 1;
  }

  /** Releases a lease: release key (recovered by polling) + message (fast path); never throws. */
  private async releaseJob(jobId: string, providerId: string): Promise<void> {
    this.holder.finish(jobId, 'released');
    try {
      const results = await this.producer
        .pipeline()
        .set(this.keys.releaseKey(jobId), '1', 'PX', RELEASE_KEY_TTL_MS)
        .publish(this.keys.releaseChannel, jobId)
        .exec();
      const failed = results?.find(([error]) => error);
      if (failed) throw failed[0];
      this.pendingReleases.delete(jobId);
    } catch {
      this.pendingReleases.set(jobId, providerId);
    }
  }

  // ---- messages and polls ----

  private onMessage(channel: string, payload: string): void {
    if (channel === this.keys.releaseChannel) {
      this.holder.finish(payload, 'released');
    } else if (channel === this.keys.freedChannel) {
      void this.onFreed(payload);
    } else if (channel === this.keys.grantChannel(this.replicaId)) {
      let grant: GrantMessage;
      try {
        grant = JSON.parse(payload) as GrantMessage;
      } catch {
        return;
      }
      this.onGrant(grant.jobId, grant.providerId);
    }
  }

  /** A holder activated one of this replica's jobs (by message or found by the poll). */
  private onGrant(jobId: string, providerId: string): void {
    if (this.leaseByJob.has(jobId)) return; // re-grant after a holder death: already in use
    const waiter = this.waiterByJob.get(jobId);
    if (waiter && !waiter.settled && waiter.jobId === jobId) {
      if (waiter.busy) waiter.pendingGrant = jobId;
      else this.settleGrant(waiter, jobId);
      return;
    }
    // Nobody here uses it (aborted, timed out, closed, or already released): free the slot.
    void this.releaseJob(jobId, providerId);
  }

  /** A provider freed a slot: move this replica's oldest waiters that list it and sit elsewhere. */
  private async onFreed(providerId: string): Promise<void> {
    const slot = this.providers.get(providerId);
    if (!slot || slot.removed || this.closed || this.freedChecks.has(providerId)) return;
    const movable = () =>
      [...this.waiters]
        .filter((w) => !w.settled && !w.busy && w.jobId !== undefined && w.providerId !== providerId && w.candidateIds.includes(providerId))
        .sort((a, b) => a.startedAt - b.startedAt);
    if (movable().length === 0) return;
    this.freedChecks.add(providerId);
    try {
      const c = (await this.readCounts([providerId], false)).get(providerId) ?? { inFlight: 0, queued: 0 };
      let free = slot.limits.maxConcurrency - c.inFlight - c.queued;
      for (const waiter of movable()) {
        if (free-- <= 0) break;
        this.runOp(waiter, () => this.moveTo(waiter, providerId));
      }
    } catch {
      // Redis unreachable: the poll retries.
    } finally {
      this.freedChecks.delete(providerId);
    }
  }

  /**
   * One round trip for every waiting request of this replica: a lock on its job means granted (a lost
   * grant message), a missing job is re-added (Redis lost state, or a holder freed it), and a waiting
   * request moves to a candidate with a free slot and an empty queue (work conservation).
   */
  private async pollWaiters(): Promise<void> {
    if (this.closed || this.polling || this.producer.status !== 'ready') return;
    this.polling = true;
    try {
      await this.retryLeftovers();
      const waiting = [...this.waiters].filter((w) => !w.settled && !w.busy).sort((a, b) => a.startedAt - b.startedAt);
      if (waiting.length === 0) return;
      const providerIds = [...new Set(waiting.flatMap((w) => this.usable(w.candidateIds).map((p) => p.providerId)))];
      const pipeline = this.producer.pipeline().pttl(this.keys.barrierKey);
      const snapshot = waiting.map((w) => ({ waiter: w, jobId: w.jobId, providerId: w.providerId }));
      for (const { jobId, providerId } of snapshot) {
        pipeline.exists(jobId ? this.keys.lockKey(providerId, jobId) : this.keys.barrierKey);
        pipeline.exists(jobId ? this.keys.queueKey(providerId, jobId) : this.keys.barrierKey);
      }
      this.queueCountCommands(pipeline, providerIds);
      const results = await pipeline.exec();
      if (!results || results.some(([error]) => error)) return;
      const barrier = Number(results[0][1]) > 0;
      const counts = this.parseCounts(providerIds, results.slice(1 + 2 * snapshot.length));
      snapshot.forEach(({ waiter, jobId }, i) => {
        if (waiter.settled || waiter.busy || waiter.jobId !== jobId) return;
        const locked = results[1 + 2 * i][1] === 1;
        const exists = results[2 + 2 * i][1] === 1;
        if (jobId !== undefined && locked) return this.onGrant(jobId, waiter.providerId);
        if (jobId !== undefined && !exists) {
          this.waiterByJob.delete(jobId);
          waiter.jobId = undefined;
        }
        if (waiter.jobId === undefined) {
          if (!barrier) this.runOp(waiter, () => this.readd(waiter, counts));
          return;
        }
        const sibling = this.usable(waiter.candidateIds).find((p) => {
          if (p.providerId === waiter.providerId) return false;
          const c = counts.get(p.providerId);
          return c !== undefined && c.inFlight + c.queued < p.maxConcurrency;
        });
        const siblingCounts = sibling && counts.get(sibling.providerId);
        if (sibling && siblingCounts) {
          siblingCounts.queued++;
          this.runOp(waiter, () => this.moveTo(waiter, sibling.providerId));
        }
      });
    } catch {
      // Redis unreachable: next round.
    } finally {
      this.polling = false;
    }
  }

  /** Releases that failed and jobs whose removal failed, retried once Redis answers. */
  private async retryLeftovers(): Promise<void> {
    for (const [jobId, providerId] of [...this.pendingReleases]) await this.releaseJob(jobId, providerId);
    for (const [jobId, providerId] of [...this.orphans]) {
      if (!(await this.removeJob(providerId, jobId))) await this.releaseJob(jobId, providerId);
      this.orphans.delete(jobId);
    }
  }

  private async pollHolder(): Promise<void> {
    if (this.closed || this.holderPolling) return;
    this.holderPolling = true;
    try {
      await this.holder.poll();
    } finally {
      this.holderPolling = false;
    }
  }

  // ---- connection life cycle ----

  /**
   * Runs on every (re)connect before admissions resume: detects a Redis restart by `run_id`, writes
   * liveness and every global concurrency again, re-registers running leases if their jobs were
   * lost (behind the barrier key), and wakes the queues.
   */
  private async onProducerReady(): Promise<void> {
    const info = await this.producer.info('server');
    const runId = /run_id:(\w+)/.exec(info)?.[1];
    const restarted = this.runId !== undefined && runId !== this.runId;
    this.runId = runId;
    this.graceUntil = Math.max(
      this.graceUntil,
      Date.now() + (restarted ? this.opts.originTtlMs : 2 * this.opts.originRefreshMs),
    );
    await this.refreshLiveness();
    const limitsLost = await this.applyLimits();
    if (restarted) {
      this.opts.logger.warn(`bullmq queue: Redis restarted (run_id ${runId}); re-registering running leases`);
      await this.reregisterLeases(limitsLost);
    }
    await Promise.all([...this.providers.values()].map((s) => s.queue.resume()));
    if (this.outage) this.opts.logger.info('bullmq queue: Redis reachable again');
    this.outage = false;
  }

  /** Re-adds leases whose jobs Redis lost, before any new admission (barrier key), so the limit keeps counting them. */
  private async reregisterLeases(limitsLost: boolean): Promise<void> {
    const leases = [...this.leaseByJob.values()].filter((l) => !l.released);
    const check = this.producer.pipeline();
    for (const lease of leases) check.exists(this.keys.queueKey(lease.providerId, lease.jobId));
    const exists = leases.length > 0 ? await check.exec() : [];
    const lost = leases.filter((_, i) => exists?.[i]?.[1] === 0);
    if (limitsLost || lost.length > 0) {
      await this.producer.set(this.keys.barrierKey, this.replicaId, 'PX', this.opts.restartBarrierMs, 'NX');
    }
    for (const lease of lost) {
      const slot = this.providers.get(lease.providerId);
      if (!slot) continue;
      const jobId = this.nextJobId();
      // Registered before the add: its grant may arrive before the add's reply, and an unknown grant is released.
      this.leaseByJob.delete(lease.jobId);
      lease.jobId = jobId;
      this.leaseByJob.set(jobId, lease);
      await slot.queue.add('lease', { origin: this.replicaId, providerId: lease.providerId, hardLimitAt: lease.hardLimitAt }, { jobId });
    }
  }

  /** Writes every provider's global concurrency; true when some was missing (Redis lost its state). */
  private async applyLimits(): Promise<boolean> {
    const slots = [...this.providers];
    if (slots.length === 0) return false;
    const pipeline = this.producer.pipeline();
    for (const [id, slot] of slots) {
      pipeline.hexists(this.keys.queueKey(id, 'meta'), 'concurrency');
      pipeline.hset(this.keys.queueKey(id, 'meta'), 'concurrency', slot.limits.maxConcurrency);
    }
    const results = await pipeline.exec();
    const failed = results?.find(([error]) => error);
    if (failed) throw failed[0];
    return slots.some((_, i) => results?.[2 * i][1] === 0);
  }

  private async refreshLiveness(): Promise<void> {
    if (this.closed) return;
    await this.producer.set(this.keys.originKey(this.replicaId), '1', 'PX', this.opts.originTtlMs);
  }

  private onRedisError(source: string, error: Error): void {
    if (this.closed) return;
    if (this.markOutage(`${source}: ${error.message}`)) return;
    this.opts.logger.info(`bullmq queue: ${source}: ${error.message}`);
  }

  /** Logs the first error of an outage only (workers repeat connection errors while Redis is down). */
  private markOutage(reason: string): boolean {
    if (this.closed) return true;
    if (this.producer.status === 'ready') return false;
    if (!this.outage) this.opts.logger.warn(`bullmq queue: Redis unreachable (${reason}); pool routes answer queue_unavailable`);
    this.outage = true;
    return true;
  }

  // ---- queues, workers and counts ----

  private createSlot(limits: QueueProvider): ProviderSlot {
    const name = this.keys.queueName(limits.providerId);
    const queue = new Queue<LeaseJobData>(name, {
      connection: this.producer,
      prefix: this.opts.prefix,
      skipVersionCheck: true,
      streams: { events: { maxLen: 100 } },
      defaultJobOptions: { removeOnComplete: true, removeOnFail: true, attempts: 1 },
    });
    queue.on('error', (e: Error) => this.onRedisError(`queue ${limits.providerId}`, e));
    let worker: Worker<LeaseJobData> | undefined;
    if (this.workerConnection) {
      worker = new Worker<LeaseJobData>(name, (job: Job<LeaseJobData>, token?: string) => this.holder.hold(job, token), {
        connection: this.workerConnection,
        prefix: this.opts.prefix,
        skipVersionCheck: true,
        concurrency: WORKER_CONCURRENCY,
        lockDuration: this.opts.lockDurationMs,
        stalledInterval: this.opts.stalledIntervalMs,
        maxStalledCount: this.opts.maxStalledCount,
        runRetryDelay: 500,
        removeOnComplete: { count: 0 },
        removeOnFail: { count: 0 },
      });
      worker.on('error', (e: Error) => this.onRedisError(`worker ${limits.providerId}`, e));
      worker.on('completed', (job: Job<LeaseJobData>) => {
        if (!this.closed) void this.producer.publish(this.keys.freedChannel, job.data.providerId).catch(() => undefined);
      });
    }
    return { limits, queue, worker, removed: false };
  }

  private usable(ids: readonly string[]): QueueProvider[] {
    const out: QueueProvider[] = [];
    for (const id of ids) {
      const slot = this.providers.get(id);
      if (slot && !slot.removed) out.push(slot.limits);
    }
    return out;
  }

  private queueCountCommands(pipeline: ReturnType<Redis['pipeline']>, ids: readonly string[]): void {
    for (const id of ids) {
      pipeline.llen(this.keys.queueKey(id, 'active'));
      pipeline.llen(this.keys.queueKey(id, 'wait'));
      pipeline.zcard(this.keys.queueKey(id, 'prioritized'));
    }
  }

  private parseCounts(ids: readonly string[], results: [Error | null, unknown][]): Map<string, ProviderCounts> {
    const out = new Map<string, ProviderCounts>();
    ids.forEach((id, i) => {
      const [active, wait, prioritized] = results.slice(3 * i, 3 * i + 3).map(([, v]) => Number(v));
      out.set(id, { inFlight: active, queued: wait + prioritized });
    });
    return out;
  }

  /** Counts of `ids` in one round trip; `writeLimits` also writes each global concurrency first. */
  private async readCounts(ids: readonly string[], writeLimits: boolean): Promise<Map<string, ProviderCounts>> {
    const pipeline = this.producer.pipeline();
    if (writeLimits) this.queueLimitCommands(pipeline, ids);
    this.queueCountCommands(pipeline, ids);
    const results = await pipeline.exec();
    if (!results) throw new Error('empty pipeline reply');
    const failed = results.find(([error]) => error);
    if (failed) throw failed[0];
    return this.parseCounts(ids, results.slice(writeLimits ? ids.length : 0));
  }

  /** Admission round trip: global concurrency written again (invariant 7), counts, restart barrier. */
  private async readCountsAndBarrier(ids: readonly string[]): Promise<[Map<string, ProviderCounts>, boolean]> {
    const pipeline = this.producer.pipeline();
    this.queueLimitCommands(pipeline, ids);
    pipeline.pttl(this.keys.barrierKey);
    this.queueCountCommands(pipeline, ids);
    const results = await pipeline.exec();
    if (!results) throw new Error('empty pipeline reply');
    const failed = results.find(([error]) => error);
    if (failed) throw failed[0];
    const barrier = Number(results[ids.length][1]) > 0;
    return [this.parseCounts(ids, results.slice(ids.length + 1)), barrier];
  }

  private queueLimitCommands(pipeline: ReturnType<Redis['pipeline']>, ids: readonly string[]): void {
    for (const id of ids) {
      const slot = this.providers.get(id);
      if (slot) pipeline.hset(this.keys.queueKey(id, 'meta'), 'concurrency', slot.limits.maxConcurrency);
      else pipeline.ping();
    }
  }

  private nextJobId(): string {
    return `${this.replicaId}.${++this.jobSeq}`;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    const settle = (p: Promise<unknown>) => withTimeout(p, this.opts.commandTimeoutMs).catch(() => undefined);
    // Waiting requests fail; their jobs leave Redis (or, if granted meanwhile, are released).
    const leaving: Promise<void>[] = [];
    for (const waiter of [...this.waiters]) {
      const { jobId, providerId } = waiter;
      this.settleReject(waiter, shutdownError());
      if (jobId !== undefined) {
        leaving.push(
          (async () => {
            if (!(await this.removeJob(providerId, jobId))) await this.releaseJob(jobId, providerId);
          })(),
        );
      }
    }
    for (const lease of [...this.leaseByJob.values()]) {
      lease.released = true;
      leaving.push(this.releaseJob(lease.jobId, lease.providerId));
    }
    this.leaseByJob.clear();
    await Promise.all(leaving.map(settle));
    // Leases held for other replicas go back to the head of their queues for another worker.
    const workers = [...this.providers.values()].flatMap((s) => (s.worker ? [s.worker] : []));
    const redisUp = this.connected() && (await this.producer.ping().then(() => true, () => false));
    // With Redis down nothing can be handed off or completed: do not wait for it.
    if (!redisUp) for (const c of [this.producer, this.subscriber, this.workerConnection]) c?.disconnect();
    const closingWorkers = Promise.all(workers.map((w) => w.close(!redisUp).catch(() => undefined)));
    this.holder.finishAll('handoff');
    const bound = Math.max(2000, 2 * this.opts.commandTimeoutMs);
    const closedInTime = await withTimeout(closingWorkers, bound).then(
      () => true,
      () => false,
    );
    if (!closedInTime) {
      // Redis is gone: worker commands wait for a reconnect that may never come. Cut the connections.
      this.opts.logger.warn('bullmq queue: workers did not close in time (Redis unreachable?); disconnecting');
      this.workerConnection?.disconnect();
      await withTimeout(closingWorkers, bound).catch(() => undefined);
    }
    await Promise.all([...this.providers.values()].map((s) => s.queue.close().catch(() => undefined)));
    await settle(this.producer.del(this.keys.originKey(this.replicaId)));
    await Promise.all([this.producer, this.subscriber, this.workerConnection].map((c) => c && settle(c.quit())));
    for (const c of [this.producer, this.subscriber, this.workerConnection]) c?.disconnect();
  }
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function unavailable(cause: unknown): AdmissionError {
  return new AdmissionError('queue_unavailable', `The provider queue (Redis) is unavailable: ${message(cause)}`, 1);
}

function shutdownError(): AdmissionError {
  return new AdmissionError('queue_unavailable', 'The gateway is shutting down.', 1);
}

function abortedError(): AdmissionError {
  return new AdmissionError('client_aborted', 'The client closed the request while it waited for a provider.');
}

function noProviderError(model: string): AdmissionError {
  return new AdmissionError('no_available_provider', `No enabled provider can serve model "${model}" right now.`, 5);
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
