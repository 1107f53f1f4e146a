/**
 * The few statistics the benchmark reports. Pure functions of their inputs, so they are table-tested
 * (`stats.spec.ts`) and the numbers in the report can be checked by hand.
 */

/** The median of the rounds of one measurement and the machine's noise across them. */
export interface Spread {
  /** Median over the rounds (the reported value). */
  median: number;
  min: number;
  max: number;
  /** How many values went in; 0 means nothing was measured and every other field is NaN. */
  n: number;
}

/**
 * Percentile by the nearest-rank method on an ascending copy: the smallest value with at least
 * `p`% of the values at or below it. `p` in [0, 100]; an empty input gives NaN.
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  if (p < 0 || p > 100) throw new RangeError(`percentile must be in [0, 100], got ${p}`);
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1];
}

/** The median; for an even count, the mean of the two middle values. Empty input gives NaN. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Arithmetic mean; empty input gives NaN. */
export function mean(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  let sum = 0;
  for (const v of values) sum += v;
  return sum / values.length;
}

/** Median, min and max of per-round values (non-finite values are left out). */
export function spread(values: readonly number[]): Spread {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return { median: NaN, min: NaN, max: NaN, n: 0 };
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite), n: finite.length };
}

/**
 * Mean latency in ms of a closed-loop load by Little's law: `connections` requests are always in
 * flight, so each takes `1000 · connections / (requests per second)` ms on average, client time
 * between requests included. Load generators report whole milliseconds; this does not round.
 */
export function littleMeanMs(connections: number, requestsPerSecond: number): number {
  if (!(requestsPerSecond > 0)) return NaN;
  return (1000 * connections) / requestsPerSecond;
}

/**
 * Per-round differences `a[i] - b[i]` of interleaved measurements (A and B measured in the same
 * round, so slow drift of the machine cancels). Rounds missing on either side are skipped.
 */
export function pairedDifferences(a: readonly number[], b: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (Number.isFinite(a[i]) && Number.isFinite(b[i])) out.push(a[i] - b[i]);
  }
  return out;
}

/** Per-round ratios `a[i] / b[i]`, skipping rounds where either is missing or `b[i]` is 0. */
export function pairedRatios(a: readonly number[], b: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (Number.isFinite(a[i]) && Number.isFinite(b[i]) && b[i] !== 0) out.push(a[i] / b[i]);
  }
  return out;
}
