import { setMaxListeners } from 'node:events';
import type { AdmissionError } from './admission-error';
import { clientAborted, noAvailableProvider, queueClosing, queueFull, queueTimeout } from './admission-errors';
import {
  chooseProvider,
  type Lease,
  type LeaseRequest,
  type ProviderCounts,
  type ProviderQueue,
  type QueueProvider,
} from './provider-queue';

interface Waiter {
  readonly modelGroupKey: string;
  readonly candidateIds: readonly string[];
  readonly startedAt: number;
  providerId: string;
  grant(providerId: string): void;
  fail(error: AdmissionError): void;
}

interface ProviderState {
  limits: QueueProvider;
  inFlight: number;
  waiting: Waiter[];
  /** Left out of the last `configure`: takes no new requests, finishes the leases it holds. */
  removed: boolean;
}

/**
 * In-process `ProviderQueue` for a single gateway (the `memory` backend, docs/architecture.md "Admission"; the embedded
 * default). Grants are synchronous on release, so a free slot never coexists with a waiting
 * request that could take it: FIFO per provider, work-conserving across a pool's candidates.
 */
export class MemoryProviderQueue implements ProviderQueue {
  readonly backend = 'memory' as const;
  private readonly providers = new Map<string, ProviderState>();
  private closed = false;

  async configure(providers: readonly QueueProvider[]): Promise<void> {
    const keep = new Set(providers.map((p) => p.providerId));
    for (const limits of providers) {
      const state = this.providers.get(limits.providerId);
      if (state) {
        state.limits = limits;
        state.removed = false;
      } else {
        this.providers.set(limits.providerId, { limits, inFlight: 0, waiting: [], removed: false });
      }
    }
    for (const [id, state] of this.providers) {
      if (keep.has(id) || state.removed) continue;
      state.removed = true;
      for (const waiter of state.waiting.splice(0)) this.requeue(waiter);
      if (state.inFlight === 0) this.providers.delete(id);
    }
    for (const state of this.providers.values()) this.fillFreeSlots(state);
  }

  acquireLease(request: LeaseRequest): Promise<Lease> {
    if (this.closed) return Promise.reject(queueClosing());
    if (request.signal?.aborted) return Promise.reject(clientAborted());
    const usable = this.usable(request.candidates.map((c) => c.providerId));
    if (usable.length === 0) return Promise.reject(noAvailableProvider(request.modelGroupKey));
    const free = chooseProvider(usable, this.countMap());
    const freeState = free && this.providers.get(free.providerId);
    if (freeState && freeState.inFlight < freeState.limits.maxConcurrency) {
      freeState.inFlight++;
      return Promise.resolve(this.lease(freeState.limits.providerId, Date.now()));
    }
    const withRoom = usable.filter((p) => this.providers.get(p.providerId)!.waiting.length < p.maxQueued);
    const target = chooseProvider(withRoom, this.countMap());
    if (!target) return Promise.reject(queueFull(request.modelGroupKey));
    return new Promise<Lease>((resolve, reject) => {
      const startedAt = Date.now();
      const finish = () => {
        clearTimeout(timer);
        request.signal?.removeEventListener('abort', onAbort);
      };
      const waiter: Waiter = {
        modelGroupKey: request.modelGroupKey,
        candidateIds: request.candidates.map((c) => c.providerId),
        startedAt,
        providerId: target.providerId,
        grant: (providerId) => {
          finish();
          resolve(this.lease(providerId, startedAt));
        },
        fail: (error) => {
          finish();
          reject(error);
        },
      };
      const leave = (error: AdmissionError) => {
        const queue = this.providers.get(waiter.providerId)?.waiting;
        const at = queue ? queue.indexOf(waiter) : -1;
        if (at >= 0) queue!.splice(at, 1);
        waiter.fail(error);
      };
      const onAbort = () => leave(clientAborted());
      const timer = setTimeout(() => leave(queueTimeout(request.modelGroupKey, request.maxWaitMs)), request.maxWaitMs);
      request.signal?.addEventListener('abort', onAbort, { once: true });
      this.providers.get(target.providerId)!.waiting.push(waiter);
    });
  }

  async counts(providerIds?: readonly string[]): Promise<Map<string, ProviderCounts>> {
    const ids = providerIds ?? [...this.providers.keys()].filter((id) => !this.providers.get(id)!.removed);
    const out = new Map<string, ProviderCounts>();
    for (const id of ids) {
      const state = this.providers.get(id);
      out.set(id, { inFlight: state?.inFlight ?? 0, queued: state?.waiting.length ?? 0 });
    }
    return out;
  }

  async isReady(): Promise<boolean> {
    return !this.closed;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const state of this.providers.values()) {
      for (const waiter of state.waiting.splice(0)) waiter.fail(queueClosing());
    }
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
    for (const [id, s] of this.providers) out.set(id, { inFlight: s.inFlight, queued: s.waiting.length });
    return out;
  }

  private lease(providerId: string, startedAt: number): Lease {
    let released = false;
    return {
      providerId,
      queueWaitMs: Date.now() - startedAt,
      signal: NEVER_ABORTED,
      release: async () => {
        if (released) return;
        released = true;
        this.releaseSlot(providerId);
      },
    };
  }

  private releaseSlot(providerId: string): void {
    const state = this.providers.get(providerId);
    if (!state) return;
    state.inFlight--;
    if (state.removed) {
      if (state.inFlight === 0) this.providers.delete(providerId);
      return;
    }
    this.fillFreeSlots(state);
  }

  /** Hands free slots of `state` to its own queue first (FIFO), then to the oldest sibling waiter that lists it. */
  private fillFreeSlots(state: ProviderState): void {
    while (state.inFlight < state.limits.maxConcurrency) {
      const waiter = state.waiting.shift() ?? this.takeOldestSiblingWaiter(state.limits.providerId);
      if (!waiter) return;
      state.inFlight++;
      waiter.grant(state.limits.providerId);
    }
  }

  private takeOldestSiblingWaiter(providerId: string): Waiter | undefined {
    let oldest: { state: ProviderState; waiter: Waiter } | undefined;
    for (const state of this.providers.values()) {
      const head = state.waiting.find((w) => w.candidateIds.includes(providerId));
      if (head && (!oldest || head.startedAt < oldest.waiter.startedAt)) oldest = { state, waiter: head };
    }
    if (!oldest) return undefined;
    oldest.state.waiting.splice(oldest.state.waiting.indexOf(oldest.waiter), 1);
    return oldest.waiter;
  }

  /** Moves a waiter of a removed provider to its least-loaded remaining candidate, or fails it. */
  private requeue(waiter: Waiter): void {
    const target = chooseProvider(this.usable(waiter.candidateIds), this.countMap());
    if (!target) {
      waiter.fail(noAvailableProvider(waiter.modelGroupKey));
      return;
    }
    waiter.providerId = target.providerId;
    this.providers.get(target.providerId)!.waiting.push(waiter);
  }
}

/**
 * One process holds its leases for sure: nothing can take them away, so this never aborts. Every
 * lease shares it and each request's fencing listener comes off at release, so more than Node's
 * default of 10 listeners at once is normal here, not a leak.
 */
const NEVER_ABORTED = new AbortController().signal;
setMaxListeners(0, NEVER_ABORTED);
