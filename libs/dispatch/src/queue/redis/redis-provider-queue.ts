import { clientAborted, noAvailableProvider, queueUnavailable, queueClosing } from '../admission-errors';
import { DEFAULT_SHARD_TAG, type LeaseKeys } from '../lease-keys';
import { LeaseStore } from '../lease-store';
import type {
  ClientCounts,
  Lease,
  LeaseRequest,
  ProviderCounts,
  QueueCounts,
  ProviderQueue,
  QueueClient,
  QueueProvider,
} from '../provider-queue';
import type { ClientBudgetWindow } from '../token-budget';
import { evalModeOf } from '../../lua/function-library';
import { connectRedis, isOutOfMemory, type RedisClient } from '../redis-connection';
import { ServiceRate } from '../service-rate';
import { ConnectionWatch } from './connection-watch';
import { readClientBudgets } from './lease-budget';
import { LeaseHolder } from './lease-holder';
import { LeaseWaiters } from './lease-waiters';
import { ProviderSlots } from './provider-slots';
import {
  resolveRedisQueueOptions,
  type RedisProviderQueueOptions,
  type ResolvedRedisQueueOptions,
} from './redis-queue-options';
import { checkRedisSettings } from './redis-settings-check';
import { ReplicaLiveness } from './replica-liveness';
import { RestartRecovery } from './restart-recovery';
import { withTimeout } from './with-timeout';

/**
 * `ProviderQueue` on Redis, exact across gateway replicas (docs/architecture.md, "Lease protocol";
 * the key layout, and what it shares with BullMQ, is `LeaseKeys`).
 *
 * Admission is one Lua script per request (`LeaseStore.admit`): it picks the least-loaded candidate,
 * checks `max_concurrency` and `max_queued`, and takes the slot or a place in line atomically. A
 * release hands the slot on inside the same script (own queue first, then a sibling's waiter) and
 * publishes the grant to the origin, which confirms it (`LeaseWaiters`). The origin is also the
 * holder: it calls the upstream and renews its leases every `renewIntervalMs` (`LeaseHolder`).
 * Fencing: a lease not renewed for `leaseTtlMs - fenceMarginMs` (monotonic clock) is aborted before
 * Redis could free it. Redis frees the slots of a replica only once its liveness key expired AND it
 * has no connection left (`ReplicaLiveness`), so a stalled (SIGSTOP) replica keeps its slots until it
 * resumes and fences itself, and a fenced lease is released by its caller once the upstream has seen
 * the aborted call's close, while a killed one loses them within `leaseTtlMs + sweepIntervalMs`.
 * Outages are `ConnectionWatch`'s, lost Redis state `RestartRecovery`'s.
 */
export class RedisProviderQueue implements ProviderQueue {
  readonly backend = 'redis' as const;
  /** This replica's id in job ids, grants and connection names. */
  readonly replicaId: string;

  private readonly opts: ResolvedRedisQueueOptions;
  private readonly store: LeaseStore;
  /** Fail-fast connection (no offline queue) for every command and script. */
  private readonly producer: RedisClient;
  private readonly subscriber: RedisClient;
  private readonly slots = new ProviderSlots();
  private readonly holder: LeaseHolder;
  private readonly liveness: ReplicaLiveness;
  private readonly watch: ConnectionWatch;
  private readonly recovery: RestartRecovery;
  private readonly waiters: LeaseWaiters;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly busyLoops = new Set<string>();
  /** The pools' recent lease times, for the Retry-After of `queue_full` (docs/architecture.md, "Clients, priority and fair share"). */
  private readonly rate = new ServiceRate();
  private closed = false;
  /** Interval of the fencing round and silence check, ms (`fenceMarginMs / 2`). */
  private readonly fenceEveryMs: number;
  /** `performance.now()` of the last fencing round; kept across `simulateStall`, as a real stop keeps it. */
  private fencedAt = performance.now();
  /** True while the last `configure` could not write the limits: the next renewal round that reaches Redis does. */
  private limitsUnwritten = false;
  /** True once `noteScriptMode` logged how scripts run. */
  private scriptModeNoted = false;
  /** The one start-up check of Redis's settings (after the first connection). */
  private settingsCheck: Promise<void> | undefined;
  private closing: Promise<void> | undefined;

  /** @throws Error when an option is out of range (see `RedisProviderQueueOptions`). */
  constructor(options: RedisProviderQueueOptions) {
    const opts = (this.opts = resolveRedisQueueOptions(options));
    this.fenceEveryMs = Math.max(10, Math.floor(opts.fenceMarginMs / 2));
    this.replicaId = opts.replicaId;
    const connectionName = `${opts.prefix}:replica:${this.replicaId}`;
    const target = { url: opts.redisUrl, cluster: opts.cluster, connectionName };
    // A failover: the command connection answers READONLY; the subscriber follows it to the new primary.
    const onReadOnly = (e: Error) => {
      this.watch.failover(e);
      if (this.subscriber.status === 'ready') this.subscriber.disconnect(true);
    };
    this.producer = connectRedis({
      ...target,
      failFast: true,
      autoPipelining: true,
      commandTimeoutMs: opts.commandTimeoutMs,
      onReadOnly,
    });
    this.subscriber = connectRedis(target);
    const store = (this.store = new LeaseStore(this.producer, opts.prefix, opts.leaseTtlMs));
    const holder = (this.holder = new LeaseHolder(store, opts, opts.logger, this.rate));
    const liveness = (this.liveness = new ReplicaLiveness(
      store,
      this.replicaId,
      opts.leaseTtlMs,
      opts.logger,
      opts.fenceMarginMs,
    ));
    const { slots, replicaId } = this;
    const logger = opts.logger;
    const isClosed = () => this.closed;
    const watch = (this.watch = new ConnectionWatch({
      commands: this.producer,
      subscriber: this.subscriber,
      logger,
      commandTimeoutMs: opts.commandTimeoutMs,
      silenceLimitMs: opts.leaseTtlMs - opts.fenceMarginMs,
      onReconnect: async () => {
        await this.recovery.onReconnect();
        this.settingsCheck ??= checkRedisSettings(store, logger);
      },
      isClosed,
    }));
    const renewAll = () => this.renewAll();
    const restartBarrierMs = opts.restartBarrierMs;
    this.recovery = new RestartRecovery({ store, liveness, holder, slots, restartBarrierMs, logger, renewAll });
    const writeLimits = () => this.recovery.writeLimits();
    const rate = this.rate;
    this.waiters = new LeaseWaiters({ store, holder, slots, watch, replicaId, writeLimits, isClosed, rate, logger });
    this.subscriber.on('message', (_channel: string, payload: string) => this.waiters.onGrantMessage(payload));
    this.subscriber
      .subscribe(store.keys.grantChannel(this.replicaId))
      .catch((e: unknown) => opts.logger.warn({ err: e }, 'redis queue: subscribe failed'));
    this.startTimers();
  }

  /**
   * Says once, at info, when the first scripts (the limits written at start) found that Redis refuses
   * Functions, so the lease scripts run by `EVALSHA` (docs/architecture.md, "Lua scripts").
   */
  private noteScriptMode(): void {
    const mode = evalModeOf(this.producer);
    if (mode === undefined || this.scriptModeNoted) return;
    this.scriptModeNoted = true;
    this.opts.logger.info(
      { scripts: 'evalsha' },
      mode === 'eval'
        ? 'redis queue: this Redis has no Functions (before 7.0): lease scripts run by EVALSHA'
        : 'redis queue: the Redis user may not use FCALL or FUNCTION LOAD: lease scripts run by EVALSHA (README "Redis requirements")',
    );
  }

  /** Key layout of this deployment (for the exporter and tests). */
  get keys(): LeaseKeys {
    return this.store.keys;
  }

  async configure(providers: readonly QueueProvider[], clients?: readonly QueueClient[]): Promise<void> {
    if (this.closed) throw queueClosing();
    await this.watch.waitForFirstConnection();
    const kept = this.slots.apply(providers);
    if (clients) this.slots.clients = clients;
    await this.writeLimits();
    this.noteScriptMode();
    this.waiters.moveOffRemoved(kept);
  }

  async acquireLease(request: LeaseRequest): Promise<Lease> {
    if (this.closed) throw queueClosing();
    if (request.signal?.aborted) throw clientAborted();
    const usable = this.slots.usable(request.candidates.map((c) => c.providerId));
    if (usable.length === 0) throw noAvailableProvider(request.modelGroupKey);
    await this.watch.admissible();
    return this.waiters.admit(request, usable);
  }

  async counts(providerIds?: readonly string[]): Promise<Map<string, ProviderCounts>> {
    const ids = providerIds ?? this.slots.activeIds();
    try {
      // A provider with a token limit reads its tokens in flight too (`ProviderSlot.tokened`).
      return await this.store.counts(ids.map((id) => this.slots.at(id, DEFAULT_SHARD_TAG)));
    } catch (e) {
      throw queueUnavailable(e);
    }
  }

  async clientCounts(): Promise<ClientCounts[]> {
    try {
      return await this.store.clientCounts([...this.slots.byTag().keys()]);
    } catch (e) {
      throw queueUnavailable(e);
    }
  }

  /**
   * Counts of `providerIds` (every active provider when omitted) and every client's, one script call
   * per shard tag (`LeaseStore.snapshotCounts`): the numbers of one tag are of one instant.
   * @throws AdmissionError `queue_unavailable` when Redis cannot answer.
   */
  async snapshotCounts(providerIds?: readonly string[]): Promise<QueueCounts> {
    const ids = providerIds ?? this.slots.activeIds();
    try {
      return await this.store.snapshotCounts(
        ids.map((id) => this.slots.at(id, DEFAULT_SHARD_TAG)),
        [...this.slots.byTag().keys()],
      );
    } catch (e) {
      throw queueUnavailable(e);
    }
  }

  /** Every window of the budgeted clients among `clients`, on Redis time (`readClientBudgets`). */
  clientBudgets(clients: readonly QueueClient[]): Promise<ClientBudgetWindow[]> {
    return readClientBudgets(this.store, [...this.slots.byTag().keys()], clients).catch((e: unknown) => {
      throw queueUnavailable(e);
    });
  }

  /** Leases this replica holds right now. */
  get heldLeaseCount(): number {
    return this.holder.size;
  }

  /**
   * True while Redis is reachable as far as this replica knows, without a command: connected, and it
   * answered within `leaseTtlMs - fenceMarginMs` (docs/architecture.md, "Hung Redis"). For `/readyz`.
   */
  redisReachable(): boolean {
    return !this.closed && this.watch.reachable();
  }

  /** True when Redis is reachable and answers PING within `commandTimeoutMs` (feeds `/readyz`). */
  async isReady(): Promise<boolean> {
    if (!this.redisReachable()) return false;
    try {
      return (await this.producer.ping()) === 'PONG';
    } catch {
      return false;
    }
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
      this.waiters.failAll(queueClosing());
      this.holder.abandon();
    })();
    return this.closing;
  }

  /** Starts the periodic tasks: renewal, fencing and the silence check, sweep, poll. */
  private startTimers(): void {
    const { opts, holder, liveness, slots } = this;
    this.timers.push(
      setInterval(() => this.loop('renew', () => this.renewAll()), opts.renewIntervalMs),
      // Fencing and the silence check share one clock and run whatever a hung Redis call holds up.
      setInterval(() => {
        holder.fenceOverdue();
        this.failWaitersIfSilent();
      }, this.fenceEveryMs),
      setInterval(() => this.loop('sweep', () => liveness.sweep(slots.byTag())), opts.sweepIntervalMs),
      setInterval(() => this.loop('poll', () => this.pollWaiters()), opts.grantPollMs),
    );
  }

  /**
   * Test hook that behaves like SIGSTOP as far as Redis can tell: every periodic task stops (no
   * renewal, liveness refresh, fencing, sweep or poll) while the connections stay open. Returns the
   * SIGCONT: the tasks start again, and the first fencing round aborts every overdue lease.
   */
  simulateStall(): () => void {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    return () => {
      if (!this.closed) this.startTimers();
    };
  }

  /**
   * Writes every provider's limits; when Redis refuses (over `maxmemory`, a command timeout), logs it
   * and leaves them for the next renewal round that reaches Redis (or the next reconnect).
   */
  private async writeLimits(): Promise<void> {
    const retry = this.limitsUnwritten;
    // Cleared first: a write that finds Redis lost its state runs a renewal round, which must not retry it.
    this.limitsUnwritten = false;
    try {
      await this.recovery.writeLimits();
      if (retry) this.opts.logger.info({}, 'redis queue: limits written');
    } catch (e) {
      this.limitsUnwritten = true;
      // Said once per episode, not every renewal round it is retried in.
      if (!retry)
        this.opts.logger.warn({ err: e }, 'redis queue: limits not written (written again once Redis accepts writes)');
    }
  }

  /**
   * Renews every held lease, then refreshes this replica's liveness, then settles leftovers. Overdue
   * leases are fenced first (a fenced lease stays held and renewed until its caller releases it) and
   * liveness is refreshed only after every renewal succeeded, within the fencing limit of the round's
   * start and never past the renewed leases' expiry, so a replica that looks alive holds no lease that
   * expired (docs/architecture.md, "Expired leases" and "Fencing").
   */
  private async renewAll(): Promise<void> {
    if (this.closed || !this.watch.connected()) return;
    this.holder.fenceOverdue();
    const renewedFrom = performance.now();
    await this.holder.renew().catch((e: unknown) => {
      this.watch.failedWrite(e);
      throw e;
    });
    const sentAt = performance.now();
    try {
      // A round the process stood still in (stopped while its renewal was on the way) renewed nothing
      // that still counts: no liveness until a round renews every held lease, fenced ones included.
      if (!(await this.liveness.refresh(renewedFrom))) return;
      this.watch.reached(sentAt);
      this.watch.writesAccepted();
      if (this.limitsUnwritten) await this.writeLimits();
    } catch (e) {
      // Over maxmemory Redis still runs the scripts that end or keep up state: an answer, not an outage.
      // Any other refusal (MISCONF, NOREPLICAS, an ACL) stops the queue like silence does, said as such.
      if (!isOutOfMemory(e)) {
        this.watch.failedWrite(e);
        throw e;
      }
      this.watch.outOfMemory(sentAt, e);
    }
    await this.holder.settleLeftovers();
  }

  /** Looks for lost grants and jobs (the silence check is {@link failWaitersIfSilent}'s). */
  private async pollWaiters(): Promise<void> {
    if (this.closed || !this.watch.connected() || this.watch.silentTooLong()) return;
    await this.waiters.poll();
  }

  /**
   * Once Redis has not answered for `leaseTtlMs - fenceMarginMs` (docs/architecture.md, "Hung Redis"),
   * logs the outage once and fails every waiting request. Runs on the fencing timer (every
   * `fenceMarginMs / 2`), never behind the poll, whose Redis call a hung Redis holds for up to
   * `commandTimeoutMs`: so the outage is seen within that half margin of the limit.
   */
  private failWaitersIfSilent(): void {
    if (this.closed) return;
    const now = performance.now();
    const stoodMs = now - this.fencedAt - this.fenceEveryMs;
    this.fencedAt = now;
    // This process stood still (SIGSTOP, a frozen VM, a blocked event loop) and asked Redis nothing
    // meanwhile: that time is not Redis's silence, and its waiters keep their place.
    if (stoodMs > this.fenceEveryMs) this.watch.excuse(stoodMs);
    this.watch.checkSilence();
    if (this.watch.silentTooLong()) this.waiters.leaveAll('outage');
  }

  /** Runs a periodic task unless its previous run is still going; errors wait for the next round. */
  private loop(name: string, fn: () => Promise<void>): void {
    if (this.busyLoops.has(name) || this.closed) return;
    this.busyLoops.add(name);
    fn()
      .catch(() => undefined)
      .finally(() => this.busyLoops.delete(name));
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    const settle = (p: Promise<unknown>) => withTimeout(p, this.opts.commandTimeoutMs).catch(() => undefined);
    const leaving = [...this.waiters.closeAll(), ...this.holder.releaseAll()];
    await Promise.all(leaving.map(settle));
    await settle(this.store.forgetReplica(this.replicaId));
    await Promise.all([this.producer, this.subscriber].map((c) => settle(c.quit())));
    for (const c of [this.producer, this.subscriber]) c.disconnect();
  }
}
