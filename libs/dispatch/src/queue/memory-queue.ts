import {
  budgetExceeded,
  budgetTooLarge,
  clientAborted,
  noAvailableProvider,
  queueClosing,
  queueFullFor,
  type FullCause,
} from './admission-errors';
import { clientOf, FairTags, orderScore } from './fair-order';
import { waitForLease } from './memory-waiter';
import { MemoryPool, type MemoryWaiter } from './memory-pool';
import {
  chooseProvider,
  DEFAULT_POOL,
  type ClientCounts,
  type Lease,
  type LeaseRequest,
  type ProviderCounts,
  type ProviderQueue,
  type QueueClient,
  type QueueCounts,
  type QueueProvider,
} from './provider-queue';
import { ServiceRate } from './service-rate';
import { fits, NEVER_ABORTED, takerAtOnce, takeSlot, type ProviderState } from './memory-provider';
import type { HeldTokens, TokenWeight } from './token-limit';
import { BudgetLedger, type BudgetReservation } from './budget-ledger';
import { budgetWeight } from './budget-weight';
import { budgetWindows, type BudgetStanding, type ClientBudgetWindow, type UsedTokens } from './token-budget';

/** A request's reservation in its client's token budget and the standing it left (docs/architecture.md, "Token budgets"). */
interface HeldBudget {
  readonly reservation: BudgetReservation;
  readonly standing: BudgetStanding;
}

/** Options of the memory backend. */
export interface MemoryQueueOptions {
  /** The clock of the token budget windows, epoch ms (tests may run it faster). @defaultValue `Date.now` */
  readonly now?: () => number;
}

/**
 * In-process `ProviderQueue` for a single gateway (the `memory` backend, docs/architecture.md
 * "Admission", "Clients, priority and fair share"; the embedded default). Grants are synchronous on
 * release, so a free slot never coexists with a waiter that could take it. Waiters of a pool are served
 * in one order (`MemoryPool`): band, fair-share tag (`FairTags`), arrival; a client at `max_in_flight`
 * is parked, one over `max_queued` refused, and a sheddable waiter gives its place to a higher band.
 * A client's token budget (docs/architecture.md, "Token budgets") is decided and reserved in the same
 * synchronous step as the lease or the place in line (`BudgetLedger`, on the process clock).
 */
export class MemoryProviderQueue implements ProviderQueue {
  readonly backend = 'memory' as const;
  private readonly providers = new Map<string, ProviderState>();
  private readonly pools = new Map<string, MemoryPool>();
  /** The clients' caps in force (`configure`'s `clients`), read by every pool. */
  private readonly caps = new Map<string, number | undefined>();
  private readonly tags = new FairTags();
  private readonly rate = new ServiceRate();
  private readonly budgets: BudgetLedger;
  private seq = 0;
  private closed = false;

  constructor(options: MemoryQueueOptions = {}) {
    this.budgets = new BudgetLedger(options.now);
  }

  async configure(providers: readonly QueueProvider[], clients?: readonly QueueClient[]): Promise<void> {
    if (clients) {
      // The caps in force change for waiting requests and leases alike; parked waiters with room now
      // go back in line, and the fill below grants them (docs/architecture.md, "Clients, priority and fair share").
      this.caps.clear();
      for (const c of clients) this.caps.set(c.id, c.maxInFlight);
      for (const pool of this.pools.values()) pool.unparkWithRoom();
    }
    const keep = new Set(providers.map((p) => p.providerId));
    for (const limits of providers) {
      const state = this.providers.get(limits.providerId);
      const pool = this.pool(limits.pool ?? DEFAULT_POOL);
      if (state) Object.assign(state, { limits, pool, removed: false });
      else this.providers.set(limits.providerId, { limits, pool, inFlight: 0, tokens: 0, removed: false });
    }
    for (const [id, state] of this.providers) {
      if (keep.has(id) || state.removed) continue;
      state.removed = true;
      for (const waiter of state.pool.waitingOn(id)) this.requeue(state.pool, waiter);
      if (state.inFlight === 0) this.providers.delete(id);
    }
    for (const state of this.providers.values()) this.fillFreeSlots(state);
  }

  acquireLease(request: LeaseRequest): Promise<Lease> {
    if (this.closed) return Promise.reject(queueClosing());
    if (request.signal?.aborted) return Promise.reject(clientAborted());
    const usable = this.usable(request.candidates.map((c) => c.providerId));
    if (usable.length === 0) return Promise.reject(noAvailableProvider(request.modelGroupKey));
    const client = clientOf(request);
    let budget: HeldBudget | undefined;
    if (budgetWindows(client.tokenBudgets).length > 0) {
      const requested = budgetWeight(request);
      const d = this.budgets.admit(client, requested);
      if (d.kind === 'too_large')
        return Promise.reject(budgetTooLarge(client.id, d.window, { ...d, requested }, d.standing));
      if (d.kind === 'exceeded')
        return Promise.reject(budgetExceeded(client.id, d.window, { ...d, requested }, d.standing));
      budget = d;
    }
    const poolName = usable[0].pool ?? DEFAULT_POOL;
    const pool = this.pool(poolName);
    const best = this.providers.get(chooseProvider(usable, this.countMap())?.providerId ?? '');
    const parked = pool.atCap(client);
    const taker = best && !parked ? takerAtOnce(best, usable, request.tokens, this.providers) : undefined;
    if (taker)
      return Promise.resolve(this.lease(taker, client, Date.now(), this.take(taker, client, request.tokens), budget));
    const full = (cause: FullCause, queued: number) => {
      const who = { model: request.modelGroupKey, client, candidates: usable };
      // Refused after all: the reservation comes back whole.
      if (budget) this.budgets.giveBack(budget.reservation);
      return queueFullFor(cause, who, poolName, this.rate, queued);
    };
    const load = pool.load(client.id);
    if (client.maxQueued !== undefined && load.queued >= client.maxQueued)
      return Promise.reject(full('client_queued', load.queued));
    const ids = usable.map((p) => p.providerId);
    const ahead = ids.reduce((n, id) => n + pool.queuedOn(id), 0);
    let target = parked
      ? best?.limits
      : chooseProvider(
          usable.filter((p) => pool.queuedOn(p.providerId) < p.maxQueued),
          this.countMap(),
        );
    if (!target) {
      const victim = pool.last(ids);
      if (!victim || !displaces(client, this.tags.peek(poolName, client), victim))
        return Promise.reject(full('queues_full', ahead));
      this.dropWaiter(pool, victim);
      // Its place in its client's fair order is given back too (see `FairTags.giveBack`).
      this.tags.giveBack(poolName, victim.client, victim.start);
      const shed = { model: victim.modelGroupKey, client: victim.client, candidates: usable };
      victim.fail(queueFullFor('shed', shed, poolName, this.rate, ahead));
      target = this.providers.get(victim.providerId)?.limits;
    }
    const start = this.tags.arrive(poolName, client);
    return this.wait(request, client, pool, { providerId: target?.providerId ?? ids[0], parked, start }, budget);
  }

  async clientBudgets(clients: readonly QueueClient[]): Promise<ClientBudgetWindow[]> {
    return this.budgets.windows(clients);
  }

  async counts(providerIds?: readonly string[]): Promise<Map<string, ProviderCounts>> {
    return this.providerCounts(providerIds);
  }

  async clientCounts(): Promise<ClientCounts[]> {
    return this.poolClientCounts();
  }

  /** `counts` and `clientCounts` in one synchronous step: no grant or release can come between them. */
  async snapshotCounts(providerIds?: readonly string[]): Promise<QueueCounts> {
    return { providers: this.providerCounts(providerIds), clients: this.poolClientCounts() };
  }

  /** The providers' counts now (every provider not removed when `providerIds` is omitted). */
  private providerCounts(providerIds?: readonly string[]): Map<string, ProviderCounts> {
    const ids = providerIds ?? [...this.providers.keys()].filter((id) => !this.providers.get(id)?.removed);
    const out = new Map<string, ProviderCounts>();
    for (const id of ids) {
      const state = this.providers.get(id);
      const c: ProviderCounts = { inFlight: state?.inFlight ?? 0, queued: state?.pool.queuedOn(id) ?? 0 };
      if (state?.limits.maxTokensInFlight !== undefined) c.tokensInFlight = state.tokens;
      out.set(id, c);
    }
    return out;
  }

  /** Every client's counts per pool now. */
  private poolClientCounts(): ClientCounts[] {
    return [...this.pools].flatMap(([pool, state]) =>
      [...state.clients].map(([clientId, load]) => ({ pool, clientId, inFlight: load.inFlight, queued: load.queued })),
    );
  }

  async isReady(): Promise<boolean> {
    return !this.closed;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const pool of this.pools.values()) for (const waiter of pool.drain()) waiter.fail(queueClosing());
  }

  /**
   * Queues a request (on `place.providerId`, or parked, with SFQ start tag `place.start`) and resolves
   * at its grant; a waiter that fails (leaves, is shed or dropped) gives its budget reservation back.
   */
  private wait(
    request: LeaseRequest,
    client: QueueClient,
    pool: MemoryPool,
    place: { providerId: string; parked: boolean; start: number },
    budget: HeldBudget | undefined,
  ): Promise<Lease> {
    return waitForLease(request, { ...place, client, seq: ++this.seq }, (w) => pool.add(w), {
      lease: (granted, held, startedAt) => {
        const state = this.providers.get(granted);
        return state && this.lease(state, client, startedAt, held, budget);
      },
      drop: (waiter) => this.dropWaiter(pool, waiter),
      failed: () => budget && this.budgets.giveBack(budget.reservation),
    });
  }

  private pool(name: string): MemoryPool {
    let pool = this.pools.get(name);
    if (!pool) this.pools.set(name, (pool = new MemoryPool(this.caps)));
    return pool;
  }

  private usable(ids: readonly string[]): QueueProvider[] {
    const out: QueueProvider[] = [];
    for (const id of ids) {
      const state = this.providers.get(id);
      if (state && !state.removed) out.push(state.limits);
    }
    return out;
  }

  private countMap(): Map<string, ProviderCounts> {
    const out = new Map<string, ProviderCounts>();
    for (const [id, s] of this.providers) out.set(id, { inFlight: s.inFlight, queued: s.pool.queuedOn(id) });
    return out;
  }

  /** Takes a slot (and, under a token limit, the request's tokens); returns the tokens held. */
  private take(state: ProviderState, client: QueueClient, tokens: TokenWeight | undefined): HeldTokens {
    state.pool.load(client.id).inFlight++;
    return takeSlot(state, tokens);
  }

  private lease(
    state: ProviderState,
    client: QueueClient,
    startedAt: number,
    held: HeldTokens,
    budget: HeldBudget | undefined,
  ): Lease {
    let released = false;
    const grantedAt = Date.now();
    const providerId = state.limits.providerId;
    return {
      providerId,
      queueWaitMs: grantedAt - startedAt,
      signal: NEVER_ABORTED,
      ...(budget ? { budget: budget.standing } : {}),
      prefillDone: async () => {
        if (released || held.prompt === 0) return;
        state.tokens -= held.prompt;
        held.prompt = 0;
        if (!state.removed) this.fillFreeSlots(state);
      },
      release: async (used?: UsedTokens) => {
        if (released) return;
        released = true;
        if (budget) this.budgets.settle(budget.reservation, used?.tokens);
        this.rate.record(state.limits.pool ?? DEFAULT_POOL, Date.now() - grantedAt);
        this.releaseSlot(state, client, held);
      },
    };
  }

  /** Ends a lease: the provider's and the client's counts (and its tokens) go down, a parked waiter of the client comes back, slots are handed on. */
  private releaseSlot(state: ProviderState, client: QueueClient, held: HeldTokens): void {
    const { pool } = state;
    state.tokens -= held.prompt + held.completion;
    state.inFlight--;
    pool.load(client.id).inFlight--;
    const unparked = pool.atCap(client) ? undefined : pool.unpark(client.id);
    if (state.removed && state.inFlight === 0) this.providers.delete(state.limits.providerId);
    if (!state.removed) this.fillFreeSlots(state);
    this.fillCandidates(unparked);
  }

  /** A waiter leaves without a grant; a parked waiter of its client that takes its room may be granted at once. */
  private dropWaiter(pool: MemoryPool, waiter: MemoryWaiter): void {
    this.fillCandidates(pool.drop(waiter));
  }

  /** Fills the free slots of every configured candidate of `waiter` (one put back in line). */
  private fillCandidates(waiter: MemoryWaiter | undefined): void {
    for (const id of waiter?.candidateIds ?? []) {
      const state = this.providers.get(id);
      if (state && !state.removed) this.fillFreeSlots(state);
    }
  }

  /**
   * Hands the free slots of `state` to the first waiters of its pool's order that list it (own queue
   * and siblings alike). Under a token limit, a first waiter whose weight does not fit stops the
   * grants until tokens come back (docs/architecture.md, "Token limits"): it is never passed.
   */
  private fillFreeSlots(state: ProviderState): void {
    const providerId = state.limits.providerId;
    while (state.inFlight < state.limits.maxConcurrency) {
      const waiter = state.pool.next(providerId);
      if (!waiter || !fits(state, waiter.tokens)) return;
      state.pool.remove(waiter);
      const held = this.take(state, waiter.client, waiter.tokens);
      this.tags.granted(state.limits.pool ?? DEFAULT_POOL, waiter.client.band, waiter.start);
      waiter.grant(providerId, held);
    }
  }

  /** Moves a waiter of a removed provider to its least-loaded remaining candidate, or fails it. */
  private requeue(pool: MemoryPool, waiter: MemoryWaiter): void {
    const target = chooseProvider(this.usable(waiter.candidateIds), this.countMap());
    if (target) return pool.move(waiter, target.providerId);
    pool.remove(waiter);
    waiter.fail(noAvailableProvider(waiter.modelGroupKey));
  }
}

/**
 * Whether a newcomer of `client` (with the start tag it would get, `start`) takes the place of
 * `victim`, the waiter served last, when every queue is full (docs/architecture.md, "Clients,
 * priority and fair share"): a higher band evicts a sheddable lower one; inside one band, a newcomer
 * that would be served before the last waiter evicts it (its client holds more than its fair share of
 * the places), so a client retrying at once cannot keep one of equal weight out of the queue.
 */
function displaces(client: QueueClient, start: number, victim: MemoryWaiter): boolean {
  if (victim.client.band === client.band)
    return orderScore(client.band, start) < orderScore(victim.client.band, victim.start);
  return victim.client.band < 0 && victim.client.band < client.band;
}
