import type { QueueClient } from './provider-queue';
import { wholeTokens } from './token-limit';
import {
  BUDGET_BUCKET_MS,
  BUDGET_RETRY_SCAN,
  BUDGET_WINDOW_MS,
  budgetWindows,
  type BudgetStanding,
  type BudgetWindow,
  type ClientBudgetWindow,
} from './token-budget';

/**
 * What one request reserved in its client's budget (docs/architecture.md, "Token budgets"): its
 * weight, tokens, and the windows it was reserved in. A reservation is held in those windows until it
 * is settled or given back, however long that takes (it belongs to no bucket, so it never leaves a
 * window while the request runs); settling charges the tokens used at that moment.
 */
export interface BudgetReservation {
  readonly clientId: string;
  readonly weight: number;
  readonly windows: readonly BudgetWindow[];
}

/**
 * The decision on one request against its client's budget; `standing` is the client's tightest window
 * after it (reserved: with the reservation; refused: as read, nothing reserved).
 */
export type BudgetDecision =
  | { readonly kind: 'reserved'; readonly reservation: BudgetReservation; readonly standing: BudgetStanding }
  | {
      readonly kind: 'exceeded';
      readonly window: BudgetWindow;
      readonly limit: number;
      readonly used: number;
      readonly retryMs: number;
      readonly standing: BudgetStanding;
    }
  | {
      readonly kind: 'too_large';
      readonly window: BudgetWindow;
      readonly limit: number;
      readonly standing: BudgetStanding;
    };

/**
 * One window of one client (docs/architecture.md, "Token budgets"): buckets of settled usage (tokens,
 * each in the bucket of its settling) with their running sum `used`, and `reserved`, the running sum of
 * the reservations held by requests waiting or in flight, kept outside the buckets: a reservation
 * counts until it is settled or given back, however old, and the tokens it used are charged when it
 * is settled. So the tokens of requests in any window never exceed the budget beyond what their
 * estimates missed, whatever their length.
 */
class WindowLedger {
  /** Bucket index → tokens used (settled) there. */
  private readonly buckets = new Map<number, number>();
  used = 0;
  reserved = 0;
  /** Oldest and newest bucket index that may hold usage; undefined while the window holds none. */
  private oldest: number | undefined;
  private newest: number | undefined;
  private readonly bucketMs: number;
  private readonly count: number;

  constructor(window: BudgetWindow) {
    this.bucketMs = BUDGET_BUCKET_MS[window];
    this.count = BUDGET_WINDOW_MS[window] / this.bucketMs;
  }

  /** Drops the buckets wholly outside the window at `now` (index < current − count), each once; reservations stay. */
  expire(now: number): void {
    const cut = Math.floor(now / this.bucketMs) - this.count;
    if (this.oldest === undefined || this.newest === undefined || this.oldest >= cut) return;
    for (let i = this.oldest; i < cut && i <= this.newest; i++) {
      this.used -= this.buckets.get(i) ?? 0;
      this.buckets.delete(i);
    }
    if (this.newest < cut) {
      this.oldest = this.newest = undefined;
      this.used = 0;
    } else this.oldest = cut;
  }

  /** Holds `weight` tokens reserved (positive) or takes them back (negative), in no bucket. */
  hold(weight: number): void {
    this.reserved = Math.max(0, this.reserved + weight);
  }

  /** Charges `used` tokens in the bucket of `now` (after `expire(now)`). */
  charge(now: number, used: number): void {
    if (used <= 0) return;
    const index = Math.floor(now / this.bucketMs);
    this.buckets.set(index, (this.buckets.get(index) ?? 0) + used);
    this.used += used;
    if (this.oldest === undefined || index < this.oldest) this.oldest = index;
    if (this.newest === undefined || index > this.newest) this.newest = index;
  }

  /**
   * ms until the oldest usage adds up to `need` tokens out of the window (scanning `BUDGET_RETRY_SCAN`
   * buckets, past them a lower bound); when the usage cannot free enough, held reservations must end
   * first and what they use counts a window from then: the time until a charge made now leaves.
   */
  retryMs(need: number, now: number): number {
    // Usage short of `need`: held reservations must end, and what they use counts a window from then.
    const settledNow = this.leavesAt(Math.floor(now / this.bucketMs)) - now;
    if (this.oldest === undefined || this.newest === undefined) return this.reserved > 0 ? settledNow : 0;
    const last = Math.min(this.newest, this.oldest + BUDGET_RETRY_SCAN - 1);
    let freed = 0;
    for (let i = this.oldest; i <= last; i++) {
      freed += this.buckets.get(i) ?? 0;
      if (freed >= need) return this.leavesAt(i) - now;
    }
    return last === this.newest && this.reserved > 0
      ? Math.max(settledNow, this.leavesAt(last) - now)
      : this.leavesAt(last) - now;
  }

  /** This window's standing at `now` (`limit` its budget, tokens): what is left of it and when it resets. */
  standing(window: BudgetWindow, limit: number, now: number): BudgetStanding {
    return {
      window,
      limitTokens: limit,
      remainingTokens: Math.max(0, limit - this.used - this.reserved),
      resetMs: this.resetMs(now),
    };
  }

  /**
   * ms until everything now in the window has left it: the newest usage, and a held reservation as
   * if settled now (a window after the current bucket); 0 when it holds none.
   */
  resetMs(now: number): number {
    if (this.used + this.reserved <= 0) return 0;
    const current = Math.floor(now / this.bucketMs);
    const last = this.reserved > 0 ? Math.max(current, this.newest ?? current) : (this.newest ?? current);
    return Math.max(0, this.leavesAt(last) - now);
  }

  private leavesAt(index: number): number {
    return (index + this.count + 1) * this.bucketMs;
  }
}

/**
 * Every client's token budget windows in one process (the memory backend; docs/architecture.md,
 * "Token budgets"), on the clock `now` (epoch ms). Each method is one synchronous step, so a decision
 * and its reservation never interleave with another request's.
 */
export class BudgetLedger {
  private readonly ledgers = new Map<string, Map<BudgetWindow, WindowLedger>>();

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * Decides on a request of `weight` tokens of `client` (which has a budget) and reserves it in every
   * window the client sets when each can hold it: over a whole window's limit `too_large` (first),
   * else a window that cannot hold it now `exceeded` (the one that frees last); else `reserved`. Each
   * carries the tightest window after the decision (lowest remaining; on a tie, the later reset).
   * @throws Error when `client` has no token budget.
   */
  admit(client: QueueClient, weight: number): BudgetDecision {
    const now = this.now();
    const windows = budgetWindows(client.tokenBudgets).map(([window, limit]) => {
      const w = this.window(client.id, window);
      w.expire(now);
      return { window, limit, w };
    });
    const standing = () => tightest(windows.map(({ window, limit, w }) => w.standing(window, limit, now)));
    const large = windows.find(({ limit }) => weight > limit);
    if (large) return { kind: 'too_large', window: large.window, limit: large.limit, standing: standing() };
    let refusal: Omit<Extract<BudgetDecision, { kind: 'exceeded' }>, 'standing'> | undefined;
    for (const { window, limit, w } of windows) {
      const used = w.used + w.reserved;
      if (used + weight <= limit) continue;
      const retryMs = w.retryMs(used + weight - limit, now);
      if (!refusal || retryMs > refusal.retryMs) refusal = { kind: 'exceeded', window, limit, used, retryMs };
    }
    if (refusal) return { ...refusal, standing: standing() };
    for (const { w } of windows) w.hold(weight);
    const reservation = { clientId: client.id, weight, windows: windows.map(({ window }) => window) };
    return { kind: 'reserved', reservation, standing: standing() };
  }

  /**
   * Settles a reservation at release: it is taken out of every window it was held in, and `used`
   * tokens (`wholeTokens`: as the Redis backend reads them; absent: the reservation as it stands) are
   * charged in the bucket of now, so they count in every window that contains the release
   * (README "Token budgets": a budget bounds requests longer than its window too).
   */
  settle(reservation: BudgetReservation, used?: number): void {
    this.apply(reservation, used === undefined ? reservation.weight : wholeTokens(used));
  }

  /** Gives a reservation back whole (a waiter that left or was dropped: nothing was used). */
  giveBack(reservation: BudgetReservation): void {
    this.apply(reservation, 0);
  }

  /** Every window of every client of `clients` with a budget, at this moment. */
  windows(clients: readonly QueueClient[]): ClientBudgetWindow[] {
    const now = this.now();
    return clients.flatMap((client) =>
      budgetWindows(client.tokenBudgets).map(([window, limit]): ClientBudgetWindow => {
        const w = this.window(client.id, window);
        w.expire(now);
        return {
          clientId: client.id,
          window,
          limitTokens: limit,
          reservedTokens: w.reserved,
          usedTokens: w.used,
          remainingTokens: Math.max(0, limit - w.used - w.reserved),
          resetMs: w.resetMs(now),
        };
      }),
    );
  }

  private apply(reservation: BudgetReservation, used: number): void {
    const now = this.now();
    const charged = Math.max(0, Math.ceil(used));
    for (const window of reservation.windows) {
      const w = this.window(reservation.clientId, window);
      w.expire(now);
      w.hold(-reservation.weight);
      w.charge(now, charged);
    }
  }

  private window(clientId: string, window: BudgetWindow): WindowLedger {
    let client = this.ledgers.get(clientId);
    if (!client) this.ledgers.set(clientId, (client = new Map()));
    let w = client.get(window);
    if (!w) client.set(window, (w = new WindowLedger(window)));
    return w;
  }
}

/** True when standing `a` is tighter than `b`: less remaining, or as much and a later reset. */
export function tighter(a: BudgetStanding, b: BudgetStanding): boolean {
  return a.remainingTokens < b.remainingTokens || (a.remainingTokens === b.remainingTokens && a.resetMs > b.resetMs);
}

/**
 * The tightest of `standings` ({@link tighter}; the first of equals).
 * @throws Error when there is none (a client without a budget).
 */
function tightest(standings: readonly BudgetStanding[]): BudgetStanding {
  const [first, ...rest] = standings;
  if (!first) throw new Error('no token budget window');
  return rest.reduce((best, s) => (tighter(s, best) ? s : best), first);
}
