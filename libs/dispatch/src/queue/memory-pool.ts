import type { AdmissionError } from './admission-error';
import type { QueueClient } from './provider-queue';
import type { HeldTokens, TokenWeight } from './token-limit';

/** A request of the memory backend waiting for a grant. */
export interface MemoryWaiter {
  readonly modelGroupKey: string;
  readonly candidateIds: readonly string[];
  readonly client: QueueClient;
  readonly startedAt: number;
  /** Its SFQ start tag and its place in the pool's order (`orderScore`), arrival `seq` breaking ties. */
  readonly start: number;
  readonly score: number;
  readonly seq: number;
  /** The provider it is queued on (counted in that provider's `queued` unless parked). */
  providerId: string;
  /** Its client is at `max_in_flight`: kept aside in its order, no provider serves it now. */
  parked: boolean;
  /** Its token weight (docs/architecture.md, "Token limits"); absent: none. */
  readonly tokens?: TokenWeight;
  /** Granted on `providerId`, holding `held` tokens there. */
  grant(providerId: string, held: HeldTokens): void;
  fail(error: AdmissionError): void;
}

/** A client's live counts in one pool. */
export interface ClientLoad {
  inFlight: number;
  /** Waiters, parked ones included. */
  queued: number;
}

const before = (a: MemoryWaiter, b: MemoryWaiter) => a.score < b.score || (a.score === b.score && a.seq < b.seq);

/**
 * The waiters of one pool in grant order, and its clients' counts (docs/architecture.md, "Clients,
 * priority and fair share"): the memory backend's counterpart of the Redis backend's `prioritized`
 * and `wanted` sets, `clients` hash and `parked` sets. Pure bookkeeping: it never grants or fails.
 */
export class MemoryPool {
  /** Every waiter of the pool, lowest score first. */
  private readonly waiters: MemoryWaiter[] = [];
  private readonly queuedBy = new Map<string, number>();
  readonly clients = new Map<string, ClientLoad>();

  /**
   * `caps`: the clients' `max_in_flight` in force by client id (leases per pool, undefined = no cap),
   * as the last `configure` that named clients set them (docs/architecture.md, "Clients, priority and
   * fair share"); a client it does not hold keeps the cap its requests name.
   */
  constructor(private readonly caps: ReadonlyMap<string, number | undefined> = new Map()) {}

  /** The cap in force for `client`: the configured one, else its request's. */
  capOf(client: QueueClient): number | undefined {
    return this.caps.has(client.id) ? this.caps.get(client.id) : client.maxInFlight;
  }

  /** The counts of `clientId`, made on first use. */
  load(clientId: string): ClientLoad {
    let load = this.clients.get(clientId);
    if (!load) this.clients.set(clientId, (load = { inFlight: 0, queued: 0 }));
    return load;
  }

  /** True when `client` holds its `max_in_flight` leases in this pool. */
  atCap(client: QueueClient): boolean {
    const cap = this.capOf(client);
    return cap !== undefined && this.load(client.id).inFlight >= cap;
  }

  /**
   * True when a waiter in line (not parked) lists `providerId`: a provider with a token limit grants
   * none at once past it (docs/architecture.md, "Token limits").
   */
  hasWaiterFor(providerId: string): boolean {
    return this.waiters.some((w) => !w.parked && w.candidateIds.includes(providerId));
  }

  /** Waiters queued on `providerId` that a provider could serve now (not parked). */
  queuedOn(providerId: string): number {
    return this.queuedBy.get(providerId) ?? 0;
  }

  add(waiter: MemoryWaiter): void {
    let at = this.waiters.length;
    while (at > 0 && before(waiter, this.waiters[at - 1])) at--;
    this.waiters.splice(at, 0, waiter);
    this.load(waiter.client.id).queued++;
    if (!waiter.parked) this.shift(waiter.providerId, 1);
  }

  /** Takes a waiter out (granted, left or shed). False when it was not there. */
  remove(waiter: MemoryWaiter): boolean {
    const at = this.waiters.indexOf(waiter);
    if (at < 0) return false;
    this.waiters.splice(at, 1);
    this.load(waiter.client.id).queued--;
    if (!waiter.parked) this.shift(waiter.providerId, -1);
    return true;
  }

  /**
   * Takes a waiter out that leaves without a grant (deadline, abort, shed). One in line whose client is
   * under its cap passes that room on: the client's first parked waiter comes back, returned here.
   */
  drop(waiter: MemoryWaiter): MemoryWaiter | undefined {
    const inLine = !waiter.parked;
    if (!this.remove(waiter) || !inLine || this.capOf(waiter.client) === undefined) return undefined;
    return this.atCap(waiter.client) ? undefined : this.unpark(waiter.client.id);
  }

  /** Moves an unparked waiter to another provider's queue (its provider was removed). */
  move(waiter: MemoryWaiter, providerId: string): void {
    if (!waiter.parked) this.shift(waiter.providerId, -1);
    waiter.providerId = providerId;
    if (!waiter.parked) this.shift(providerId, 1);
  }

  /**
   * The first waiter in grant order that lists `providerId` and whose client is under its cap.
   * Waiters met on the way whose client is at its cap are parked, as the Redis backend parks them.
   */
  next(providerId: string): MemoryWaiter | undefined {
    for (const waiter of this.waiters) {
      if (waiter.parked || !waiter.candidateIds.includes(providerId)) continue;
      if (!this.atCap(waiter.client)) return waiter;
      waiter.parked = true;
      this.shift(waiter.providerId, -1);
    }
    return undefined;
  }

  /** Puts the first parked waiter of `clientId` back in its provider's queue; returns it. */
  unpark(clientId: string): MemoryWaiter | undefined {
    const waiter = this.waiters.find((w) => w.parked && w.client.id === clientId);
    if (!waiter) return undefined;
    waiter.parked = false;
    this.shift(waiter.providerId, 1);
    return waiter;
  }

  /**
   * After the caps in force changed: each client gets as many parked waiters back in line as its cap
   * leaves room for (all of them without a cap), first in order first; the grant step parks any
   * again whose client is at its cap when its turn comes. Returns the waiters put back.
   */
  unparkWithRoom(): MemoryWaiter[] {
    const room = new Map<string, number>();
    const back: MemoryWaiter[] = [];
    for (const waiter of this.waiters) {
      if (!waiter.parked) continue;
      const id = waiter.client.id;
      const cap = this.capOf(waiter.client);
      if (!room.has(id)) room.set(id, cap === undefined ? Infinity : cap - this.load(id).inFlight);
      const left = room.get(id) ?? 0;
      if (left <= 0) continue;
      room.set(id, left - 1);
      waiter.parked = false;
      this.shift(waiter.providerId, 1);
      back.push(waiter);
    }
    return back;
  }

  /** The waiter queued on one of `providerIds` that would be served last: the one shedding evicts first. */
  last(providerIds: readonly string[]): MemoryWaiter | undefined {
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const waiter = this.waiters[i];
      if (!waiter.parked && providerIds.includes(waiter.providerId)) return waiter;
    }
    return undefined;
  }

  /** Every waiter queued on `providerId`, parked or not. */
  waitingOn(providerId: string): MemoryWaiter[] {
    return this.waiters.filter((w) => w.providerId === providerId);
  }

  /** Takes every waiter out (the queue closes). */
  drain(): MemoryWaiter[] {
    const all = this.waiters.splice(0);
    this.queuedBy.clear();
    for (const load of this.clients.values()) load.queued = 0;
    return all;
  }

  private shift(providerId: string, by: number): void {
    this.queuedBy.set(providerId, this.queuedOn(providerId) + by);
  }
}
