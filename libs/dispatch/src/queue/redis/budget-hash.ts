/**
 * The values of a client's token budget hash, `<prefix>:{<tag>}:budget:<client>` (docs/architecture.md,
 * "Token budgets", Redis layout; the scripts' `includes/budget-key.lua` writes them): per window `w`
 * (`m` the minute, `d` the day) field `w` holds the window's state and field `w:<i>` bucket i's charge,
 * each packed as little-endian IEEE-754 doubles (Redis Lua's `struct` formats `<dddd` and `<dd`), so
 * that the scripts read and write numbers without parsing or formatting text. What a status reader
 * wants is `readTokenBudgets`; this is the layout itself, for tools and tests that look inside.
 */

/** A window's state as stored: token sums over the window, and the bucket indexes that may hold charges. */
export interface BudgetWindowState {
  /** Tokens used (settled) in the window's buckets. */
  used: number;
  /** Tokens reserved by requests not settled yet. */
  reserved: number;
  /** Oldest bucket index that may hold charges (`floor(ms / bucket ms)`); absent while the window holds none. */
  oldest?: number;
  /** Newest bucket index that may hold charges; absent while the window holds none. */
  newest?: number;
}

/** A bucket's charge as stored: tokens charged in it (used + reserved) and the reserved part of them. */
export interface BudgetBucketCharge {
  charged: number;
  reserved: number;
}

/** A window's state field value (32 bytes). An absent bound is stored as -1. */
export function packBudgetState(state: BudgetWindowState): Buffer {
  const out = Buffer.alloc(32);
  out.writeDoubleLE(state.used, 0);
  out.writeDoubleLE(state.reserved, 8);
  out.writeDoubleLE(state.oldest ?? -1, 16);
  out.writeDoubleLE(state.newest ?? -1, 24);
  return out;
}

/**
 * A window's state from its field value (`null`: the field is absent, an empty window).
 * @throws Error when the value is not 32 bytes (not written by this layout).
 */
export function unpackBudgetState(value: Buffer | null): BudgetWindowState {
  if (value === null) return { used: 0, reserved: 0 };
  if (value.length !== 32) throw new Error(`a budget window state is 32 bytes, this value has ${value.length}`);
  const state: BudgetWindowState = { used: value.readDoubleLE(0), reserved: value.readDoubleLE(8) };
  const oldest = value.readDoubleLE(16);
  if (oldest >= 0) {
    state.oldest = oldest;
    state.newest = value.readDoubleLE(24);
  }
  return state;
}

/** A bucket field value (16 bytes). */
export function packBudgetCharge(charge: BudgetBucketCharge): Buffer {
  const out = Buffer.alloc(16);
  out.writeDoubleLE(charge.charged, 0);
  out.writeDoubleLE(charge.reserved, 8);
  return out;
}

/**
 * A bucket's charge from its field value (`null`: absent, nothing charged).
 * @throws Error when the value is not 16 bytes.
 */
export function unpackBudgetCharge(value: Buffer | null): BudgetBucketCharge {
  if (value === null) return { charged: 0, reserved: 0 };
  if (value.length !== 16) throw new Error(`a budget bucket charge is 16 bytes, this value has ${value.length}`);
  return { charged: value.readDoubleLE(0), reserved: value.readDoubleLE(8) };
}
