import { AdmissionError } from './admission-error';
import { resolveBullmqOptions, type BullmqProviderQueueOptions, type ResolvedBullmqOptions } from './bullmq-options';
import { DEFAULT_SHARD_TAG, type LeaseKeys } from './lease-keys';
import { LeaseHolder } from './lease-holder';
import { LeaseStore, type StoredProvider } from './lease-store';
import type { Lease, LeaseRequest, ProviderCounts, ProviderQueue, QueueProvider } from './provider-queue';
import { connectRedis, type RedisClient } from './redis-connection';
import { ReplicaLiveness } from './replica-liveness';

/** A provider this replica was configured with. */
interface ProviderSlot extends StoredProvider {
  limits: QueueProvider;
  /** Left out of the last `configure`: takes no new requests; its running leases end normally. */
  removed: boolean;
}

/** A request of this replica waiting for a grant. */
interface Waiter {
  readonly request: LeaseRequest;
  readonly startedAt: number;
  provider: StoredProvider;
  jobId: string;
  settled: boolean;
  /** A leave, confirm or re-admission of this waiter is running: other steps wait for the next poll. */
  busy: boolean;
  resolve(lease: Lease): void;
  reject(error: AdmissionError): void;
  cleanup(): void;
}

/**
 * `ProviderQueue` on Redis, exact across gateway replicas (docs/architecture.md, "Lease protocol").
 *
 * Admission is one Lua script per request (`LeaseStore.admit`): it picks the least-loaded candidate,
 * checks `max_concurrency` and `max_queued`, and takes the slot or a place in line atomically. A
 * waiting request is a BullMQ job in its provider's `wait` list; a lease is a job in `active`. A
 * release hands the slot on inside the same script (own queue first, then a sibling's waiter) and
 * publishes the grant to the origin, which confirms it. The origin is also the holder: it calls the
 * upstream and renews its leases every `renewIntervalMs`. Fencing: a lease not renewed for
 * `leaseTtlMs - fenceMarginMs` (monotonic clock) is aborted before Redis could free it. Redis frees
 * the slots of a replica only once its liveness key expired AND it has no connection left, so a
 * stalled (SIGSTOP) replica keeps its slots until it resumes and fences itself, while a killed one
 * loses them within `leaseTtlMs + sweepIntervalMs`.
 */
export class BullmqProviderQueue implements ProviderQueue {
  readonly backend = 'redis' as const;
  /** This replica's id in job ids, grants and connection names. */
  readonly replicaId: string;

  private readonly opts: ResolvedBullmqOptions;
  private readonly store: LeaseStore;
  /** Fail-fast connection (no offline queue) for every command and script. */
  private readonly producer: RedisClient;
  private readonly subscriber: RedisClient;
  private readonly providers = new Map<string, ProviderSlot>();
  private readonly waiters = new Map<string, Waiter>();
  private readonly holder: LeaseHolder;
  private readonly liveness: ReplicaLiveness;
  private readonly timers: NodeJS.Timeout[] = [];
  private connectionCheck: Promise<void> = Promise.resolve();
  private readonly firstConnection: Promise<void>;
  private markFirstConnection!: () => void;
  private outage = false;
  /** `performance.now()` when this replica's liveness refresh last succeeded: Redis answered then. */
  private reachedAt = performance.now();
  private closed = false;
  private closing: Promise<void> | undefined;
  private jobSeq = 0;
  private readonly busyLoops = new Set<string>();

  /** @throws Error when an option is out of range (see `BullmqProviderQueueOptions`). */
  constructor(options: BullmqProviderQueueOptions) {
    this.opts = resolveBullmqOptions(options);
    this.replicaId = this.opts.replicaId;
    const connectionName = `${this.opts.prefix}:replica:${this.replicaId}`;
    const target = { url: this.opts.redisUrl, cluster: this.opts.cluster, connectionName };
    this.producer = connectRedis({ ...target, failFast: true, commandTimeoutMs: this.opts.commandTimeoutMs });
    this.subscriber = connectRedis(target);
    this.store = new LeaseStore(this.producer, this.opts.prefix, this.opts.leaseTtlMs);
    this.holder = new LeaseHolder(this.store, this.opts, this.opts.logger);
    this.liveness = new ReplicaLiveness(this.store, this.replicaId, this.opts.leaseTtlMs, this.opts.logger);
    this.producer.on('error', (e: Error) => this.onRedisError('commands', e));
    this.subscriber.on('error', (e: Error) => this.onRedisError('subscriber', e));
    this.firstConnection = new Promise<void>((resolve) => (this.markFirstConnection = resolve));
    this.producer.on('ready', () => {
      this.connectionCheck = this.onProducerReady()
        .catch((e: unknown) => this.opts.logger.warn({ err: e }, 'redis queue: reconnect check failed'))
        .finally(() => this.markFirstConnection());
    });
    this.producer.on('close', () => this.markOutage('connection closed'));
    this.subscriber.on('message', (_channel: string, payload: string) => this.onGrantMessage(payload));
    this.subscriber
      .subscribe(this.store.keys.grantChannel(this.replicaId))
      .catch((e: unknown) => this.opts.logger.warn({ err: e }, 'redis queue: subscribe failed'));
    this.timers.push(
      setInterval(() => this.loop('renew', () => this.renewAll()), this.opts.renewIntervalMs),
      setInterval(() => this.holder.fenceOverdue(), Math.max(10, Math.floor(this.opts.fenceMarginMs / 2))),
      setInterval(
        () => this.loop('sweep', () => this.liveness.sweep(this.providersByTag())),
        this.opts.sweepIntervalMs,
      ),
      setInterval(() => this.loop('poll', () => this.pollWaiters()), this.opts.grantPollMs),
    );
  }

  /** Key layout of this deployment (for the exporter and tests). */
  get keys(): LeaseKeys {
    return this.store.keys;
  }

  async configure(providers: readonly QueueProvider[]): Promise<void> {
    if (this.closed) throw shutdownError();
    await withTimeout(this.firstConnection, this.opts.commandTimeoutMs).catch(() => undefined);
    const keep = new Set(providers.map((p) => p.providerId));
    for (const limits of providers) {
      if (!Number.isInteger(limits.maxConcurrency) || limits.maxConcurrency < 1) {
        throw new Error(`provider "${limits.providerId}": max_concurrency must be an integer ≥ 1`);
      }
      const shardTag = limits.shardTag ?? DEFAULT_SHARD_TAG;
      const slot = this.providers.get(limits.providerId);
      if (slot && slot.shardTag === shardTag) {
        slot.limits = limits;
        slot.removed = false;
      } else {
        this.providers.set(limits.providerId, { providerId: limits.providerId, shardTag, limits, removed: false });
      }
    }
    for (const [id, slot] of this.providers) if (!keep.has(id)) slot.removed = true;
    try {
      await this.writeLimits();
    } catch (e) {
      this.opts.logger.warn({ err: e }, 'redis queue: limits not written (written again on reconnect)');
    }
    for (const waiter of this.waiters.values()) {
      if (!keep.has(waiter.provider.providerId)) void this.step(waiter, () => this.moveOffRemoved(waiter));
    }
  }

  acquireLease(request: LeaseRequest): Promise<Lease> {
    return this.admit(request);
  }

  async counts(providerIds?: readonly string[]): Promise<Map<string, ProviderCounts>> {
    const ids = providerIds ?? [...this.providers.values()].filter((s) => !s.removed).map((s) => s.providerId);
    try {
      return await this.store.counts(
        ids.map((id) => this.providers.get(id) ?? { providerId: id, shardTag: DEFAULT_SHARD_TAG }),
      );
    } catch (e) {
      throw unavailable(e);
    }
  }

  /** Leases this replica holds right now. */
  get heldLeaseCount(): number {
    return this.holder.size;
  }

  /** True when Redis answers PING within `commandTimeoutMs` (feeds `/readyz`). */
  async isReady(): Promise<boolean> {
    if (this.closed || this.producer.status !== 'ready') return false;
    try {
      return (await this.producer.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  private connected(): boolean {
    return this.producer.status === 'ready';
  }

  /** Fails waiting requests (their jobs leave Redis), releases held leases, unregisters, closes connections and timers. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  /**
   * Test hook that behaves like SIGKILL as far as Redis can tell: drops every connection and timer
   * without leaving, releasing or unregistering anything. Pending `acquireLease` calls reject.
   */
  async simulateCrash(): Promise<void> {
    this.closed = true;
    this.closing ??= (async () => {
      for (const timer of this.timers) clearInterval(timer);
      this.producer.disconnect();
      this.subscriber.disconnect();
      for (const waiter of [...this.waiters.values()]) this.settle(waiter, shutdownError());
      this.holder.abandon();
    })();
    return this.closing;
  }

  // ---- admission ----

  private async admit(request: LeaseRequest): Promise<Lease> {
    if (this.closed) throw shutdownError();
    if (request.signal?.aborted) throw abortedError();
    const usable = this.usable(request.candidates.map((c) => c.providerId));
    if (usable.length === 0) throw noProviderError(request.modelGroupKey);
    if (this.producer.status !== 'ready') {
      await withTimeout(this.firstConnection, this.opts.commandTimeoutMs).catch(() => undefined);
      if (!this.connected()) throw unavailable('Redis is not connected');
    }
    await withTimeout(this.connectionCheck, this.opts.commandTimeoutMs).catch((e: unknown) => {
      throw unavailable(e);
    });
    const startedAt = Date.now();
    return new Promise<Lease>((resolve, reject) => {
      const onAbort = () => void this.step(waiter, () => this.leave(waiter, 'abort'));
      const timer = setTimeout(() => void this.step(waiter, () => this.leave(waiter, 'deadline')), request.maxWaitMs);
      const waiter: Waiter = {
        request,
        startedAt,
        provider: usable[0],
        jobId: '',
        settled: false,
        busy: false,
        resolve,
        reject,
        cleanup: () => {
          clearTimeout(timer);
          request.signal?.removeEventListener('abort', onAbort);
        },
      };
      request.signal?.addEventListener('abort', onAbort, { once: true });
      void this.step(waiter, () => this.enqueue(waiter, usable, true));
    });
  }

  /** One admission script for a waiter; a grant resolves it, a place in line leaves it to grants and polls. */
  private async enqueue(waiter: Waiter, usable: readonly ProviderSlot[], mayRewrite: boolean): Promise<void> {
    const tag = usable[0].shardTag;
    const candidates = usable.filter((p) => p.shardTag === tag);
    const jobId = this.nextJobId();
    waiter.jobId = jobId;
    // Registered before the script runs: a grant message can arrive before its reply.
    this.waiters.set(jobId, waiter);
    const sentAt = performance.now();
    const data = JSON.stringify({ origin: this.replicaId, model: waiter.request.modelGroupKey });
    let result;
    try {
      result = await this.store.admit(
        tag,
        candidates.map((p) => p.providerId),
        jobId,
        data,
      );
    } catch (e) {
      // The script may have run: leave (or release) that job once Redis answers.
      this.holder.leaveLater(jobId, candidates[0]);
      this.settle(waiter, unavailable(e));
      return;
    }
    if (result.kind === 'unconfigured' && mayRewrite) {
      this.waiters.delete(jobId);
      await this.writeLimits().catch(() => undefined);
      return this.enqueue(waiter, usable, false);
    }
    if (result.kind === 'full' || result.kind === 'unconfigured') {
      this.settle(
        waiter,
        new AdmissionError(
          'queue_full',
          `Every provider of model "${waiter.request.modelGroupKey}" has a full queue.`,
          1,
        ),
      );
      return;
    }
    const provider = this.providers.get(result.providerId) ?? candidates[0];
    waiter.provider = provider;
    if (result.kind === 'granted') this.grantTo(waiter, provider, sentAt);
  }

  /** A grant for a queued waiter (message or poll): confirm it in Redis, then hand the lease over. */
  private async confirm(waiter: Waiter, providerId: string): Promise<void> {
    const provider = this.providers.get(providerId) ?? { ...waiter.provider, providerId };
    const sentAt = performance.now();
    const lost = await this.store.renew(provider.shardTag, [{ providerId, jobId: waiter.jobId }], true);
    if (lost.includes(waiter.jobId)) {
      this.settle(waiter, unavailable('the granted lease was lost in Redis'));
      return;
    }
    this.grantTo(waiter, provider, sentAt);
  }

  private grantTo(waiter: Waiter, provider: StoredProvider, renewedAt: number): void {
    if (waiter.settled) return;
    waiter.settled = true;
    waiter.cleanup();
    this.waiters.delete(waiter.jobId);
    waiter.resolve(this.holder.hold(waiter.jobId, provider, renewedAt, waiter.startedAt));
  }

  /** Deadline, abort or outage: the job leaves its queue; a grant that raced it is used (deadline) or released. */
  private async leave(waiter: Waiter, why: 'deadline' | 'abort' | 'outage'): Promise<void> {
    let outcome;
    try {
      outcome = await this.store.leave(waiter.provider, waiter.jobId);
    } catch {
      this.holder.leaveLater(waiter.jobId, waiter.provider);
      outcome = { kind: 'left' as const };
    }
    if (outcome.kind === 'granted') {
      if (why === 'deadline') return this.confirm(waiter, outcome.providerId);
      const provider = this.providers.get(outcome.providerId) ?? { ...waiter.provider, providerId: outcome.providerId };
      await this.holder.release(waiter.jobId, provider);
    }
    const model = waiter.request.modelGroupKey;
    const silentMs = Math.round(performance.now() - this.reachedAt);
    this.settle(
      waiter,
      why === 'abort'
        ? abortedError()
        : why === 'outage'
          ? unavailable(`Redis has not answered for ${silentMs} ms while the request waited in the queue`)
          : new AdmissionError(
              'queue_timeout',
              `No provider of model "${model}" freed a slot within ${waiter.request.maxWaitMs} ms.`,
              1,
            ),
    );
  }

  /** The waiter's provider was removed from the config: queue it again on its remaining candidates. */
  private async moveOffRemoved(waiter: Waiter): Promise<void> {
    const outcome = await this.store.leave(waiter.provider, waiter.jobId).catch(() => ({ kind: 'gone' as const }));
    if (outcome.kind === 'granted') return this.confirm(waiter, outcome.providerId);
    this.waiters.delete(waiter.jobId);
    const usable = this.usable(waiter.request.candidates.map((c) => c.providerId));
    if (usable.length === 0) return this.settle(waiter, noProviderError(waiter.request.modelGroupKey));
    await this.enqueue(waiter, usable, true);
  }

  /** Runs one step of a waiter at a time; steps of a settled waiter are skipped. */
  private async step(waiter: Waiter, fn: () => Promise<void>): Promise<void> {
    if (waiter.settled || waiter.busy) {
      if (!waiter.settled) setTimeout(() => void this.step(waiter, fn), 5);
      return;
    }
    waiter.busy = true;
    try {
      await fn();
    } catch (e) {
      this.settle(waiter, unavailable(e));
    } finally {
      waiter.busy = false;
    }
  }

  private settle(waiter: Waiter, error: AdmissionError): void {
    if (waiter.settled) return;
    waiter.settled = true;
    waiter.cleanup();
    this.waiters.delete(waiter.jobId);
    waiter.reject(error);
  }

  private onGrantMessage(payload: string): void {
    const sep = payload.lastIndexOf('|');
    const jobId = payload.slice(0, sep);
    const providerId = this.store.keys.providerOf(payload.slice(sep + 1));
    const waiter = this.waiters.get(jobId);
    if (waiter) {
      void this.step(waiter, () => this.confirm(waiter, providerId));
    } else if (!this.holder.knows(jobId) && !this.closed) {
      // A grant nobody waits for any more (the waiter settled on a Redis error): give the slot back.
      const provider = this.providers.get(providerId) ?? { providerId, shardTag: DEFAULT_SHARD_TAG };
      void this.holder.release(jobId, provider);
    }
  }

  /** Refreshes this replica's liveness, then renews every held lease and retries leftovers. */
  private async renewAll(): Promise<void> {
    if (this.closed || !this.connected()) return;
    const sentAt = performance.now();
    await this.liveness.refresh();
    this.reachedAt = sentAt;
    await this.holder.renew();
  }

  // ---- waiters' recovery and dead replicas ----

  private async pollWaiters(): Promise<void> {
    if (this.closed) return;
    this.failWaitersInOutage();
    if (this.producer.status !== 'ready') return;
    const byTag = new Map<string, Waiter[]>();
    for (const waiter of this.waiters.values()) {
      if (waiter.settled || waiter.busy || waiter.jobId === '') continue;
      const list = byTag.get(waiter.provider.shardTag) ?? [];
      list.push(waiter);
      byTag.set(waiter.provider.shardTag, list);
    }
    for (const [tag, list] of byTag) {
      const states = await this.store.poll(
        tag,
        list.map((w) => ({ providerId: w.provider.providerId, jobId: w.jobId })),
      );
      list.forEach((waiter, i) => {
        const state = states[i];
        if (state.kind === 'granted') void this.step(waiter, () => this.confirm(waiter, state.providerId));
        if (state.kind === 'gone') {
          // Lost with Redis state: queue it again.
          void this.step(waiter, async () => {
            this.waiters.delete(waiter.jobId);
            const usable = this.usable(waiter.request.candidates.map((c) => c.providerId));
            if (usable.length === 0) return this.settle(waiter, noProviderError(waiter.request.modelGroupKey));
            await this.enqueue(waiter, usable, true);
          });
        }
      });
    }
  }

  /**
   * A queued request does not outwait a Redis outage (docs/architecture.md, "Fencing"): once Redis has not
   * answered for as long as a held lease is fenced after (`leaseTtlMs - fenceMarginMs`), every
   * waiter fails with `queue_unavailable`. Its job leaves Redis when Redis answers again.
   */
  private failWaitersInOutage(): void {
    const silentMs = performance.now() - this.reachedAt;
    if (this.waiters.size === 0 || silentMs <= this.opts.leaseTtlMs - this.opts.fenceMarginMs) return;
    for (const waiter of this.waiters.values()) {
      if (!waiter.settled && !waiter.busy && waiter.jobId !== '')
        void this.step(waiter, () => this.leave(waiter, 'outage'));
    }
  }

  // ---- connection life cycle ----

  /**
   * Runs on every (re)connect before admissions resume: detects a Redis that lost its state
   * (`run_id` changed), raises the barrier so live holders register their leases before any new
   * grant, writes every limit again and renews (re-registers) this replica's leases.
   */
  private async onProducerReady(): Promise<void> {
    if (await this.liveness.restarted()) {
      this.opts.logger.warn(
        { barrier_ms: this.opts.restartBarrierMs },
        `redis queue: Redis restarted; no grants for ${this.opts.restartBarrierMs} ms while running leases register again`,
      );
      for (const tag of this.providersByTag().keys()) await this.store.raiseBarrier(tag, this.opts.restartBarrierMs);
    }
    await this.writeLimits();
    await this.renewAll();
    if (this.outage) this.opts.logger.info({}, 'redis queue: Redis reachable again');
    this.outage = false;
  }

  /**
   * Writes every provider's limits (one script per shard tag). Where Redis had none while this replica
   * holds leases there, Redis lost its state: the script raises the barrier before it grants anything,
   * and this replica's leases are registered again at once.
   */
  private async writeLimits(): Promise<void> {
    let lostState = false;
    for (const [tag] of this.providersByTag()) {
      const limits = [...this.providers.values()].filter((p) => p.shardTag === tag && !p.removed).map((p) => p.limits);
      if (limits.length === 0) continue;
      const holding = this.holder.holdsOn(tag);
      const missing = await this.store.configure(tag, limits, holding ? this.opts.restartBarrierMs : 0);
      if (missing && holding) lostState = true;
    }
    if (lostState) {
      this.opts.logger.warn(
        {},
        'redis queue: Redis lost the limits while leases were held; registering them again behind the barrier',
      );
      await this.renewAll();
    }
  }

  private providersByTag(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const slot of this.providers.values()) {
      const list = out.get(slot.shardTag) ?? [];
      list.push(slot.providerId);
      out.set(slot.shardTag, list);
    }
    return out;
  }

  private onRedisError(source: string, error: Error): void {
    if (this.closed) return;
    if (this.markOutage(source, error)) return;
    this.opts.logger.info({ err: error, connection: source }, 'redis queue: connection error');
  }

  /** Logs the first error of an outage only: why (`reason`: the connection that failed, or how) and the error, when there is one. */
  private markOutage(reason: string, err?: Error): boolean {
    if (this.closed) return true;
    if (this.producer.status === 'ready') return false;
    if (!this.outage)
      this.opts.logger.warn({ reason, err }, 'redis queue: Redis unreachable; pool routes answer queue_unavailable');
    this.outage = true;
    return true;
  }

  /** Runs a periodic task unless its previous run is still going; errors wait for the next round. */
  private loop(name: string, fn: () => Promise<void>): void {
    if (this.busyLoops.has(name) || this.closed) return;
    this.busyLoops.add(name);
    fn()
      .catch(() => undefined)
      .finally(() => this.busyLoops.delete(name));
  }

  private usable(ids: readonly string[]): ProviderSlot[] {
    const out: ProviderSlot[] = [];
    for (const id of ids) {
      const slot = this.providers.get(id);
      if (slot && !slot.removed) out.push(slot);
    }
    return out;
  }

  private nextJobId(): string {
    return `${this.replicaId}.${++this.jobSeq}`;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    const settle = (p: Promise<unknown>) => withTimeout(p, this.opts.commandTimeoutMs).catch(() => undefined);
    const leaving: Promise<unknown>[] = [];
    for (const waiter of [...this.waiters.values()]) {
      const { jobId, provider } = waiter;
      this.settle(waiter, shutdownError());
      if (jobId === '') continue;
      leaving.push(
        this.store.leave(provider, jobId).then(async (outcome) => {
          if (outcome.kind === 'granted')
            await this.store.release(this.providers.get(outcome.providerId) ?? provider, jobId);
        }),
      );
    }
    leaving.push(...this.holder.releaseAll());
    await Promise.all(leaving.map(settle));
    await settle(this.store.forgetReplica(this.replicaId));
    await Promise.all([this.producer, this.subscriber].map((c) => settle(c.quit())));
    for (const c of [this.producer, this.subscriber]) c.disconnect();
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
