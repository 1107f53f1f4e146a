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
 * weight, tokens, and the bucket it was put in, per window the client sets. Release settles it there.
 */
export interface BudgetReservation {
  readonly clientId: string;
  readonly weight: number;
  readonly buckets: Partial<Record<BudgetWindow, number>>;
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

/** One window of one client: buckets of charges (used + reserved) and running sums. */
class WindowLedger {
  /** Bucket index → tokens charged there (used + reserved) and the reserved part. */
  private readonly buckets = new Map<number, { charged: number; reserved: number }>();
  used = 0;
  reserved = 0;
  /** Oldest and newest bucket index that may hold charges; undefined while the window holds none. */
  private oldest: number | undefined;
  private newest: number | undefined;
  private readonly bucketMs: number;
  private readonly count: number;

  constructor(window: BudgetWindow) {
    this.bucketMs = BUDGET_BUCKET_MS[window];
    this.count = BUDGET_WINDOW_MS[window] / this.bucketMs;
  }

  /** Drops the buckets wholly outside the window at `now` (index < current − count), each once. */
  expire(now: number): void {
    const cut = Math.floor(now / this.bucketMs) - this.count;
    if (this.oldest === undefined || this.newest === undefined || this.oldest >= cut) return;
    for (let i = this.oldest; i < cut && i <= this.newest; i++) {
      const b = this.buckets.get(i);
      if (!b) continue;
      this.used -= b.charged - b.reserved;
      this.reserved -= b.reserved;
      this.buckets.delete(i);
    }
    if (this.newest < cut) {
      this.oldest = this.newest = undefined;
      this.used = this.reserved = 0;
    } else this.oldest = cut;
  }

  /** True when bucket `index` still counts at `now`. */
  live(index: number, now: number): boolean {
    return this.oldest !== undefined && index >= this.oldest && index >= Math.floor(now / this.bucketMs) - this.count;
  }

  /** Adds `charged` (of which `reserved` is reserved) to the bucket of `now`; returns its index. */
  add(now: number, charged: number, reserved: number, index = Math.floor(now / this.bucketMs)): number {
    const b = this.buckets.get(index) ?? { charged: 0, reserved: 0 };
    b.charged += charged;
    b.reserved += reserved;
    this.buckets.set(index, b);
    this.used += charged - reserved;
    this.reserved += reserved;
    if (this.oldest === undefined || index < this.oldest) this.oldest = index;
    if (this.newest === undefined || index > this.newest) this.newest = index;
    return index;
  }

  /** ms until the oldest charges add up to `need` tokens out of the window (scanning `BUDGET_RETRY_SCAN` buckets). */
  retryMs(need: number, now: number): number {
    if (this.oldest === undefined || this.newest === undefined) return 0;
    const last = Math.min(this.newest, this.oldest + BUDGET_RETRY_SCAN - 1);
    let freed = 0;
    let at = last;
    for (let i = this.oldest; i <= last; i++) {
      freed += this.buckets.get(i)?.charged ?? 0;
      if (freed >= need) {
        at = i;
        break;
      }
    }
    return this.leavesAt(at) - now;
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
   * ms until every charge now in the window has left it; 0 when it holds none (no bucket, or only
   * buckets whose reservations were given back whole).
   */
  resetMs(now: number): number {
    if (this.newest === undefined || this.used + this.reserved <= 0) return 0;
    return Math.max(0, this.leavesAt(this.newest) - now);
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
    const buckets: Partial<Record<BudgetWindow, number>> = {};
    for (const { window, w } of windows) buckets[window] = w.add(now, weight, weight);
    return { kind: 'reserved', reservation: { clientId: client.id, weight, buckets }, standing: standing() };
  }

  /**
   * Settles a reservation at release: `used` tokens (`wholeTokens`: as the Redis backend reads them)
   * are charged in its place (absent: the reservation is charged as it stands), in each bucket it was
   * put in that still counts.
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
    for (const [window, index] of Object.entries(reservation.buckets) as [BudgetWindow, number][]) {
      const w = this.window(reservation.clientId, window);
      if (w.live(index, now)) w.add(now, charged - reservation.weight, -reservation.weight, index);
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
